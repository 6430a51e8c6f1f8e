package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// Cluster is the planner loop's (planner/loop.Cluster), restated here so
// that the loop's own tests can run the contract without an import cycle.
type Cluster interface {
	Capacity(ctx context.Context) (jobs.Capacity, error)
	Workers(ctx context.Context, jobID string) ([]jobs.Worker, error)
	Scale(ctx context.Context, job jobs.Job, count int, reason string) error
	StopWorker(ctx context.Context, jobID, workerID, reason string) error
	Teardown(ctx context.Context, jobID string) error
}

// Backend is one cluster under test.
type Backend struct {
	// New returns a fresh, empty cluster with room for at least 3 workers
	// of the jobs Job makes.
	New func(t *testing.T) Cluster
	// Job returns a job with this ID that the backend can run (CPU-only
	// for local, say).
	Job func(id string) jobs.Job
	// Wait bounds how long a change may take to show (default 10 s).
	Wait time.Duration
}

// Run runs every case of the contract against b.
func Run(t *testing.T, b Backend) {
	if b.Wait == 0 {
		b.Wait = 10 * time.Second
	}
	cases := []struct {
		name string
		f    func(t *testing.T, b Backend)
	}{
		{"CapacityIsConsistent", testCapacity},
		{"UnknownJob", testUnknownJob},
		{"ScaleUpIsIdempotent", testScaleUp},
		{"ScaleDown", testScaleDown},
		{"StopWorkerRemovesTheChosenOne", testStopWorker},
		{"TeardownRemovesEveryWorker", testTeardown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.f(t, b) })
	}
}

// mustScale asks c for n workers of j and fails the test if it refuses.
func mustScale(ctx context.Context, t *testing.T, c Cluster, j jobs.Job, n int, reason string) {
	t.Helper()
	if err := c.Scale(ctx, j, n, reason); err != nil {
		t.Fatal(err)
	}
}

// grown is a fresh cluster of b with the job id grown to n workers, torn
// down when the test ends.
func grown(t *testing.T, b Backend, id string, n int) (Cluster, context.Context, jobs.Job) {
	t.Helper()
	c := b.New(t)
	ctx := ctxFor(t)
	j := b.Job(id)
	t.Cleanup(func() { _ = c.Teardown(context.Background(), j.ID) })
	mustScale(ctx, t, c, j, n, "contract: grow")
	return c, ctx, j
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 10 ms until it returns nil or b.Wait passes.
func eventually(t *testing.T, b Backend, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(b.Wait)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after %s", what, err, b.Wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveCount waits until exactly n workers of id are pending or running
// and returns them.
func liveCount(t *testing.T, b Backend, c Cluster, id string, n int) []jobs.Worker {
	t.Helper()
	ctx := ctxFor(t)
	var got []jobs.Worker
	eventually(t, b, fmt.Sprintf("%d live workers of %s", n, id), func() error {
		ws, err := c.Workers(ctx, id)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.JobID != id || w.ID == "" {
				return fmt.Errorf("worker %+v: want job %s and an ID", w, id)
			}
			if !validState(w.State) {
				return fmt.Errorf("worker %s: unknown state %q", w.ID, w.State)
			}
		}
		got = planner.LiveWorkers(ws)
		if len(got) != n {
			return fmt.Errorf("%d live of %d listed", len(got), len(ws))
		}
		return nil
	})
	return got
}

func validState(s jobs.WorkerState) bool {
	switch s {
	case jobs.WorkerPending, jobs.WorkerRunning, jobs.WorkerStopping, jobs.WorkerComplete, jobs.WorkerFailed:
		return true
	}
	return false
}

func units(c jobs.Capacity) (free, total int) {
	for _, n := range c.Nodes {
		free += n.FreeGPUs + n.FreeCPUSlots
		total += n.GPUs + n.CPUSlots
	}
	return free, total
}

func testCapacity(t *testing.T, b Backend) {
	c := b.New(t)
	capa, err := c.Capacity(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(capa.Nodes) == 0 {
		t.Fatal("no nodes")
	}
	seen := map[string]bool{}
	for _, n := range capa.Nodes {
		if n.ID == "" || seen[n.ID] {
			t.Fatalf("node IDs must be unique and set: %+v", capa.Nodes)
		}
		seen[n.ID] = true
		if n.FreeGPUs < 0 || n.FreeGPUs > n.GPUs || n.FreeCPUSlots < 0 || n.FreeCPUSlots > n.CPUSlots {
			t.Fatalf("node %s: free %d/%d GPUs, %d/%d CPU slots", n.ID, n.FreeGPUs, n.GPUs, n.FreeCPUSlots, n.CPUSlots)
		}
		// Foreign GPUs are held, so never free, and the suite's cluster
		// runs no foreign jobs.
		if n.ForeignGPUs != 0 {
			t.Fatalf("node %s: %d GPUs held by foreign jobs on a cluster that runs none", n.ID, n.ForeignGPUs)
		}
	}
	if free, _ := units(capa); free < 3 {
		t.Fatalf("an empty cluster has %d free units; the suite needs 3", free)
	}
}

func testUnknownJob(t *testing.T, b Backend) {
	c := b.New(t)
	ctx := ctxFor(t)
	ws, err := c.Workers(ctx, "j-unknown")
	if err != nil || len(ws) != 0 {
		t.Fatalf("Workers of an unknown job = %v, %v; want none, no error", ws, err)
	}
	if err := c.Teardown(ctx, "j-unknown"); err != nil {
		t.Fatalf("Teardown of an unknown job = %v, want nil", err)
	}
}

func testScaleUp(t *testing.T, b Backend) {
	c := b.New(t)
	ctx := ctxFor(t)
	j := b.Job("j-up")
	before, err := c.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustScale(ctx, t, c, j, 2, "contract: grow")
	ws := liveCount(t, b, c, j.ID, 2)
	if ws[0].ID == ws[1].ID {
		t.Fatalf("two workers share an ID: %+v", ws)
	}
	// Asking again changes nothing.
	mustScale(ctx, t, c, j, 2, "contract: same")
	again := liveCount(t, b, c, j.ID, 2)
	ids := map[string]bool{ws[0].ID: true, ws[1].ID: true}
	for _, w := range again {
		if !ids[w.ID] {
			t.Fatalf("Scale to the same count replaced workers: %+v then %+v", ws, again)
		}
	}
	eventually(t, b, "capacity taken by the running workers", func() error {
		now, err := c.Capacity(ctx)
		if err != nil {
			return err
		}
		f0, _ := units(before)
		f1, _ := units(now)
		if f0-f1 < 2 {
			return fmt.Errorf("free units %d -> %d", f0, f1)
		}
		return nil
	})
	t.Cleanup(func() { _ = c.Teardown(context.Background(), j.ID) })
}

func testScaleDown(t *testing.T, b Backend) {
	c, ctx, j := grown(t, b, "j-down", 3)
	liveCount(t, b, c, j.ID, 3)
	mustScale(ctx, t, c, j, 1, "contract: shrink")
	liveCount(t, b, c, j.ID, 1)
}

func testStopWorker(t *testing.T, b Backend) {
	c, ctx, j := grown(t, b, "j-stop", 2)
	var victim string
	eventually(t, b, "2 running workers", func() error {
		all, err := c.Workers(ctx, j.ID)
		if err != nil {
			return err
		}
		var run []jobs.Worker
		for _, w := range all {
			if w.State == jobs.WorkerRunning && !w.Queued {
				run = append(run, w)
			}
		}
		if len(run) != 2 {
			return fmt.Errorf("%d running workers, want 2", len(run))
		}
		victim = run[0].ID
		return nil
	})
	if err := c.StopWorker(ctx, j.ID, victim, "contract: remove"); err != nil {
		t.Fatal(err)
	}
	// The chosen worker goes; whether the backend replaces it at once
	// (local) or lowers the count (Nomad), a Scale back to 2 gives two
	// live workers, none of them the removed one.
	eventually(t, b, "two live workers without "+victim, func() error {
		all, err := c.Workers(ctx, j.ID)
		if err != nil {
			return err
		}
		l := planner.LiveWorkers(all)
		for _, w := range l {
			if w.ID == victim {
				return fmt.Errorf("the stopped worker %s is still %s", victim, w.State)
			}
		}
		if len(l) != 2 {
			// As a planner round does: read capacity, then scale.
			if _, err := c.Capacity(ctx); err != nil {
				return err
			}
			if err := c.Scale(ctx, j, 2, "contract: grow back"); err != nil {
				return err
			}
			return fmt.Errorf("%d live workers, want 2", len(l))
		}
		return nil
	})
	if err := c.StopWorker(ctx, j.ID, "no-such-worker", "contract"); err == nil {
		t.Fatal("StopWorker of a worker the cluster does not know: want an error")
	}
}

func testTeardown(t *testing.T, b Backend) {
	c := b.New(t)
	ctx := ctxFor(t)
	j := b.Job("j-gone")
	mustScale(ctx, t, c, j, 2, "contract: grow")
	liveCount(t, b, c, j.ID, 2)
	if err := c.Teardown(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, b, "every worker gone", func() error {
		ws, err := c.Workers(ctx, j.ID)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.State.Live() {
				return fmt.Errorf("worker %s still %s", w.ID, w.State)
			}
		}
		return nil
	})
	if err := c.Teardown(ctx, j.ID); err != nil {
		t.Fatalf("second Teardown = %v, want nil", err)
	}
}
