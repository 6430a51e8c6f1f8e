package builtin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// TestFP16KeepsStepMetadataExact: with the gradient on the wire as fp16,
// every sample is still used exactly once. The partitions hold 4,500
// samples and the per-rank batches are odd (13 and 12), so the offsets the
// metadata carries are odd integers above 2048, which fp16 cannot hold:
// had the metadata travelled compressed, the consumption records would be
// off and samples missed or repeated.
func TestFP16KeepsStepMetadataExact(t *testing.T) {
	r := testenv.NewRedis(t)
	spec := workertest.TestSpec(1, 2)
	b := spec.Trainer.Builtin
	b.Dataset.Samples, b.Dataset.Partitions, b.BatchSize = 9000, 2, 25
	c := workertest.NewCluster(t, r, spec, 0)
	c.Env = []string{"EDL_WORKER_COMPRESSION=fp16"}
	c.Start()
	c.Start()
	c.Finish(90 * time.Second)
	c.CheckExactlyOnce()
	// The records are built from the metadata itself, so a rounded end
	// offset also moves the next start and still looks contiguous; the
	// sign is a step that took other than its rank's 13 or 12 samples
	// before the partition's end (a sample skipped or taken twice).
	recs, err := datapipe.New(c.R.Client, c.Coord().Keys(), "test").DebugRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for step, payload := range recs {
		_, segs, _ := strings.Cut(payload, "|")
		for _, seg := range strings.Split(strings.TrimSuffix(segs, ","), ",") {
			var p int
			var s, e int64
			if _, err := fmt.Sscanf(seg, "%d:%d:%d", &p, &s, &e); err != nil {
				t.Fatalf("step %d: record %q: %v", step, payload, err)
			}
			if n := e - s; n != 12 && n != 13 && e != 4500 {
				bad = append(bad, fmt.Sprintf("step %d part %d [%d,%d)", step, p, s, e))
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%d steps consumed a wrong number of samples (the metadata was rounded): %v", len(bad), bad[:min(5, len(bad))])
	}
}
