package live

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// TestLiveTailMergesIntoLastBatch: a live program with BatchNorm (in
// training mode it raises "Expected more than 1 value per channel when
// training" on a one-sample batch) over partitions of 25 samples at a
// per-rank batch of 12: `next` hands out 12, then 13 (not 12, 12, 1),
// every sample once, and the job succeeds.
func TestLiveTailMergesIntoLastBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		world, batch int
		samples      int64
		parts        int
	}{
		{"world 1, batch 12", 1, 12, 25, 1},
		{"world 2, global batch 24", 2, 24, 50, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLive(t, tc.world, tc.world, tc.samples, tc.parts,
				"--batch", strconv.Itoa(tc.batch), "--hidden", "8", "--batchnorm", "--epochs", "2")
			for i := range tc.world {
				l.add("w" + strconv.Itoa(i))
			}
			l.wait(3*time.Minute, 2)
			recs, err := datapipe.New(l.r.Client, coord.NewKeys(l.r.Prefix, "j1"), "check").DebugRecords(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got, err := workertest.PartitionRanges(recs)
			if err != nil {
				t.Fatal(err)
			}
			want := [][2]int64{{0, 12}, {12, 25}}
			for e := range 2 {
				for p := range tc.parts {
					if rs := got[[2]int{e, p}]; !slices.Equal(rs, want) {
						t.Errorf("epoch %d partition %d: steps took %v, want %v", e, p, rs, want)
					}
				}
			}
		})
	}
}
