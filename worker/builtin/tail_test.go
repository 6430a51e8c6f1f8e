package builtin

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// TestLeaveWhileOthersSawEmptyQueue removes the worker holding the epoch's
// last partition while the other members already found the queue empty: the
// partition goes back to the queue, and the survivors must claim it again
// after the switch (they once kept "no more partitions" across a switch in
// which nobody new had joined, and the rest of the partition was missed).
func TestLeaveWhileOthersSawEmptyQueue(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		full bool // the state broadcast to everyone instead of the direct hand-over
	}{
		{"SIGTERM", syscall.SIGTERM, false},
		{"SIGKILL", syscall.SIGKILL, false},
		{"SIGTERM full broadcast", syscall.SIGTERM, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testenv.NewRedis(t)
			spec := workertest.TestSpec(2, 2)
			spec.Trainer.Builtin.Dataset.Partitions = 4 // 3 workers: one holds the last partition alone
			c := workertest.NewCluster(t, r, spec, 3*time.Millisecond)
			c.Full = tc.full
			for range 3 {
				c.Start()
			}
			c.WaitWorld(3, 20*time.Second)
			holder := c.WaitLonePartition(0, 100, 500, 20*time.Second)
			t.Logf("%s holds epoch 0's last partition; sending %s", holder, tc.sig)
			c.Signal(holder, tc.sig)
			c.WaitWorld(2, 20*time.Second)
			c.Finish(60 * time.Second)
			c.CheckExactlyOnce()
		})
	}
}

// partitionShares: per epoch and partition of c's job, the [start, end)
// ranges its applied steps took, in order.
func partitionShares(t *testing.T, c *workertest.Cluster) map[[2]int][][2]int64 {
	t.Helper()
	recs, err := datapipe.New(c.R.Client, c.Coord().Keys(), "test").DebugRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, err := workertest.PartitionRanges(recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPartitionTailMergesIntoLastBatch: a rank's share that would leave a
// single sample of its partition takes it too (batch+1), so no step hands
// a rank a one-sample batch (BatchNorm in training mode refuses one). A
// partition of 25 at a per-rank batch of 12 goes 12, 13, not 12, 12, 1;
// a partition of 250 at 249 (the reproduction) in one step of 250.
func TestPartitionTailMergesIntoLastBatch(t *testing.T) {
	for _, tc := range []struct {
		name                string
		world, batch, parts int
		samples             int
		want                [][2]int64
	}{
		{"world 1, batch 12", 1, 12, 2, 50, [][2]int64{{0, 12}, {12, 25}}},
		{"world 2, global batch 24", 2, 24, 2, 50, [][2]int64{{0, 12}, {12, 25}}},
		{"250 at 249", 1, 249, 1, 250, [][2]int64{{0, 250}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testenv.NewRedis(t)
			spec := workertest.TestSpec(2, tc.world)
			bt := spec.Trainer.Builtin
			bt.BatchSize = tc.batch
			bt.Dataset.Samples, bt.Dataset.Partitions = tc.samples, tc.parts
			c := workertest.NewCluster(t, r, spec, 0)
			for range tc.world {
				c.Start()
			}
			c.Finish(60 * time.Second)
			c.CheckExactlyOnce()
			got := partitionShares(t, c)
			for e := range bt.Epochs {
				for p := range tc.parts {
					if rs := got[[2]int{e, p}]; !slices.Equal(rs, tc.want) {
						t.Errorf("epoch %d partition %d: steps took %v, want %v", e, p, rs, tc.want)
					}
				}
			}
		})
	}
}

// TestElasticTailNeverOneSample resizes 2 -> 3 -> 2 mid-epoch over
// partitions of 97 samples (global batch 24: per rank 12, then 8, then
// 12; 97 = 8*12+1 = 12*8+1, so before the tail merged every partition
// ended in a one-sample step, and one taken at two batch sizes can too):
// every sample once, and no applied step's range of a partition is a
// single sample.
func TestElasticTailNeverOneSample(t *testing.T) {
	r := testenv.NewRedis(t)
	spec := workertest.TestSpec(2, 2)
	spec.Trainer.Builtin.Dataset.Samples = 2910 // 30 partitions of 97
	c := workertest.NewCluster(t, r, spec, 3*time.Millisecond)
	c.Start()
	c.Start()
	c.WaitWorld(2, 20*time.Second)
	c.WaitSteps(15, 20*time.Second)
	w3 := c.Start()
	c.WaitWorld(3, 20*time.Second)
	c.WaitSteps(60, 20*time.Second)
	c.Signal(w3, syscall.SIGTERM)
	c.WaitWorld(2, 20*time.Second)
	c.Finish(60 * time.Second)
	c.CheckExactlyOnce()
	ones := 0
	for k, rs := range partitionShares(t, c) {
		for _, rg := range rs {
			if rg[1]-rg[0] == 1 {
				ones++
				t.Errorf("epoch %d partition %d: a one-sample step %v (all: %v)", k[0], k[1], rg, rs)
			}
		}
	}
	t.Logf("%d one-sample steps; last generation %d", ones, c.Gen().Number)
}
