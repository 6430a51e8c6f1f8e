package worker

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
)

// TestRestoreAfterEveryWorkerKilled trains with periodic checkpoints,
// SIGKILLs every worker at once, starts fresh ones, and checks that they
// resume from the newest checkpoint and that every sample of every epoch
// still went into exactly one applied step.
func TestRestoreAfterEveryWorkerKilled(t *testing.T) {
	r := testenv.NewRedis(t)
	dir := t.TempDir()
	spec := testSpec(3, 2)
	spec.Checkpoint.EverySteps, spec.Checkpoint.Keep = 10, 3
	c := newCluster(t, r, spec, 5*time.Millisecond)
	c.store = "file://" + dir
	store, err := checkpoint.Open(context.Background(), c.store, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newest := func() int64 {
		ms, err := checkpoint.List(context.Background(), store, CheckpointJob(c.job))
		if err != nil || len(ms) == 0 {
			return -1
		}
		return ms[len(ms)-1].Step
	}
	a, b := c.start(), c.start()
	c.waitWorld(2, 20*time.Second)
	c.waitFor("a checkpoint", 30*time.Second, func() bool { return newest() >= 19 })
	// Freeze both workers (SIGSTOP) at a moment when steps were applied
	// after the newest checkpoint: stopped, neither applies a step nor
	// finishes an upload, so the checkpoint the fresh workers must restore,
	// and that there are steps to redo, is known before the kill. Read
	// while they ran, a checkpoint could land between the read and the kill.
	var cp, before int64
	c.waitFor("both workers stopped with steps applied after the newest checkpoint", 60*time.Second, func() bool {
		c.waitSteps(3, 20*time.Second)
		c.stop(a, b)
		cp, before = newest(), c.steps()
		if cp >= 19 && before > cp {
			return true
		}
		c.signal(a, syscall.SIGCONT)
		c.signal(b, syscall.SIGCONT)
		return false
	})
	c.signal(a, syscall.SIGKILL)
	c.signal(b, syscall.SIGKILL)
	_ = c.wait(a, 10*time.Second)
	_ = c.wait(b, 10*time.Second)
	n1, n2 := c.start(), c.start()
	c.finish(90 * time.Second)
	want := fmt.Sprintf("from_checkpoint=true step=%d", cp)
	if out := c.output(n1) + c.output(n2); !strings.Contains(out, want) {
		t.Errorf("fresh workers' logs do not say %q", want)
	}
	c.checkExactlyOnce()
	if cp < 0 || before <= cp {
		t.Fatalf("checkpoint %d, steps applied before the kill %d: want steps after the checkpoint", cp, before)
	}
	g := c.gen()
	if g == nil || g.Number < 2 {
		t.Fatalf("generation after restore: %+v", g)
	}
	if last := newest(); last <= before {
		t.Fatalf("final checkpoint at step %d, want after %d", last, before)
	}
	t.Logf("restored from step %d after %d applied steps; final checkpoint at %d", cp, before, newest())
}
