package builtin

import (
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
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
