package nomadx_test

import (
	"context"
	"testing"

	"github.com/edl-nomad/edl/nomadx/nomadtest"
)

// TestLeavingWorkerOfPurgedJob: a worker StopWorker signalled has exited,
// and the operator purged the job (`nomad job stop -purge`) before the
// next Capacity noticed. Its finished allocation stays listed (desired
// run, until Nomad's GC) but the job is gone: Capacity must not try to
// lower the count of a job that no longer exists, round after round (the
// cached count from edl's last write is no evidence that it does).
func TestLeavingWorkerOfPurgedJob(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	ctx := context.Background()
	if err := e.c.Scale(ctx, gpuJob("w", 1, nil), 3, "start"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	ws, err := e.c.Workers(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.StopWorker(ctx, "w", ws[1].ID, "straggler"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	if _, _, err := e.srv.Client().Jobs().Deregister("edl-w", true, nil); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	before := len(e.srv.Requests())
	for range 3 {
		if _, err := e.c.Capacity(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range e.srv.Requests()[before:] {
		if r.Path == "/v1/job/edl-w/scale" {
			t.Errorf("%s %s -> %d: a purged job's count was lowered", r.Method, r.Path, r.Status)
		}
	}
}
