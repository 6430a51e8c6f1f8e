package worker

import (
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
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
			spec := testSpec(2, 2)
			spec.Trainer.Builtin.Dataset.Partitions = 4 // 3 workers: one holds the last partition alone
			c := newCluster(t, r, spec, 3*time.Millisecond)
			c.full = tc.full
			for range 3 {
				c.start()
			}
			c.waitWorld(3, 20*time.Second)
			holder := c.waitLonePartition(0, 100, 500, 20*time.Second)
			t.Logf("%s holds epoch 0's last partition; sending %s", holder, tc.sig)
			c.signal(holder, tc.sig)
			c.waitWorld(2, 20*time.Second)
			c.finish(60 * time.Second)
			c.checkExactlyOnce()
		})
	}
}
