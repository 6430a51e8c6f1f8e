package builtin

import (
	"context"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

func startingJob(t *testing.T) (*jobstore.Store, string) {
	t.Helper()
	r := testenv.NewRedis(t)
	st := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	ctx := context.Background()
	j, _, err := st.Create(ctx, "tenant", workertest.TestSpec(1, 1), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, j.ID, jobs.Starting, "placed"); err != nil {
		t.Fatal(err)
	}
	return st, j.ID
}

// TestReporterFinalTransitionWaitsForRunning reproduces a defect:
// the background flush took the first progress and started moving the job
// to running; the final transition, made meanwhile, found nothing queued
// and sent Succeeded first: "invalid state transition starting ->
// succeeded", and the job stayed starting for ever.
func TestReporterFinalTransitionWaitsForRunning(t *testing.T) {
	st, id := startingJob(t)
	js := &workertest.SlowRunning{Store: st, Delay: 200 * time.Millisecond, Entered: make(chan struct{})}
	r := core.NewReporter(js, id, time.Hour, workertest.TestLog(t))
	ctx := context.Background()
	r.Progress(jobs.Progress{Step: 0, Samples: 24, WorldSize: 1})
	bg := make(chan struct{})
	go func() { defer close(bg); r.Flush(ctx) }() // the reporter's own loop
	<-js.Entered
	r.Transition(ctx, jobs.Succeeded, "training finished")
	<-bg
	if b, _ := js.FinalErr.Load().(workertest.ErrBox); b.Err != nil {
		t.Errorf("final transition: %v", b.Err)
	}
	j, err := st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.Succeeded {
		t.Fatalf("job %s after the final transition, want succeeded", j.State)
	}
}

// TestReporterSucceedsWithoutProgress: a final transition with no progress
// ever written (or its Running write lost) still goes through running.
func TestReporterSucceedsWithoutProgress(t *testing.T) {
	st, id := startingJob(t)
	r := core.NewReporter(st, id, time.Hour, workertest.TestLog(t))
	ctx := context.Background()
	r.Transition(ctx, jobs.Succeeded, "training finished")
	j, err := st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.Succeeded {
		t.Fatalf("job %s, want succeeded", j.State)
	}
}

// TestReporterRetriesRunningAfterAnError: a Running write that failed is
// tried again by the next flush (it used to be marked done before it ran).
func TestReporterRetriesRunningAfterAnError(t *testing.T) {
	st, id := startingJob(t)
	ctx := context.Background()
	fail := &failingOnce{Store: st}
	r := core.NewReporter(fail, id, time.Hour, workertest.TestLog(t))
	r.Progress(jobs.Progress{Step: 0})
	r.Flush(ctx)
	if j, _ := st.Get(ctx, id); j.State != jobs.Starting {
		t.Fatalf("job %s after a failed Running write, want still starting", j.State)
	}
	r.Progress(jobs.Progress{Step: 1})
	r.Flush(ctx)
	if j, _ := st.Get(ctx, id); j.State != jobs.Running {
		t.Fatalf("job %s after the next flush, want running", j.State)
	}
}

type failingOnce struct {
	*jobstore.Store
	failed bool
}

func (f *failingOnce) Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error) {
	if !f.failed {
		f.failed = true
		return jobs.Job{}, context.DeadlineExceeded
	}
	return f.Store.Transition(ctx, id, to, reason)
}
