package builtin

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// jobCluster creates a job in the real job store, moves it to starting as
// the planner would, and returns a cluster whose workers use the store.
func jobCluster(t *testing.T, epochs int) (*workertest.Cluster, *jobstore.Store) {
	r := testenv.NewRedis(t)
	st := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	ctx := context.Background()
	j, _, err := st.Create(ctx, "tenant", workertest.TestSpec(epochs, 2), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Transition(ctx, j.ID, jobs.Starting, "placed"); err != nil {
		t.Fatal(err)
	}
	c := workertest.NewCluster(t, r, j.Spec, 5*time.Millisecond)
	c.Job, c.Jobs = j.ID, true
	return c, st
}

func TestJobStoreRunToSuccess(t *testing.T) {
	c, st := jobCluster(t, 2)
	c.Start()
	c.Start()
	var running jobs.Job
	c.WaitFor("job running with progress", 30*time.Second, func() bool {
		j, err := st.Get(context.Background(), c.Job)
		running = j
		return err == nil && j.State == jobs.Running && j.Progress.Step > 0 && j.Progress.WorldSize == 2
	})
	c.Finish(60 * time.Second)
	j, err := st.Get(context.Background(), c.Job)
	if err != nil {
		t.Fatal(err)
	}
	b := c.Spec.Trainer.Builtin
	if j.State != jobs.Succeeded || j.Progress.Samples != int64(b.Epochs*b.Dataset.Samples) || j.Progress.Step <= running.Progress.Step {
		t.Fatalf("job %s progress %+v, want succeeded with %d samples", j.State, j.Progress, b.Epochs*b.Dataset.Samples)
	}
	c.CheckExactlyOnce()
}

func TestJobStoreCancellingStopsWorkers(t *testing.T) {
	c, st := jobCluster(t, 50)
	ids := []string{c.Start(), c.Start()}
	ctx := context.Background()
	c.WaitFor("job running", 30*time.Second, func() bool {
		j, err := st.Get(ctx, c.Job)
		return err == nil && j.State == jobs.Running
	})
	if _, err := st.Transition(ctx, c.Job, jobs.Cancelling, "user"); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := c.Wait(id, 30*time.Second); err != nil {
			t.Fatalf("worker %s after cancelling: %v, want exit 0", id, err)
		}
	}
	j, err := st.Get(ctx, c.Job)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.Cancelled && j.State != jobs.Cancelling {
		t.Fatalf("job state %s after cancel", j.State)
	}
	if j.Progress.Epoch >= 50 {
		t.Fatalf("job trained to the end (%+v) despite the cancel", j.Progress)
	}
}

// TestJobStoreShortJobsFinish: one-epoch jobs of 2,000 samples end while
// the reporter's first Running write may still be in flight; each must end
// succeeded (once 3 of 4 stayed starting for ever).
func TestJobStoreShortJobsFinish(t *testing.T) {
	r := testenv.NewRedis(t)
	st := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	ctx := context.Background()
	type run struct {
		c  *workertest.Cluster
		id string
	}
	var runs []run
	for range 4 {
		spec := workertest.TestSpec(1, 1)
		spec.Trainer.Builtin.Dataset.Samples = 2000
		spec.Trainer.Builtin.Dataset.Partitions = 20
		j, _, err := st.Create(ctx, "tenant", spec, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(ctx, j.ID, jobs.Starting, "placed"); err != nil {
			t.Fatal(err)
		}
		c := workertest.NewCluster(t, r, j.Spec, 0)
		c.Job, c.Jobs = j.ID, true
		c.RunningDelay = 300 * time.Millisecond // Redis slow on that write: the job ends meanwhile
		runs = append(runs, run{c, c.Start()})
	}
	for _, rn := range runs {
		if err := rn.c.Wait(rn.id, 60*time.Second); err != nil {
			t.Errorf("worker of %s: %v", rn.c.Job, err)
		}
		j, err := st.Get(ctx, rn.c.Job)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != jobs.Succeeded || j.Progress.Samples != 2000 {
			t.Errorf("job %s: %s with %d samples, want succeeded with 2000", j.ID, j.State, j.Progress.Samples)
		}
		rn.c.CheckExactlyOnce()
	}
}

// TestWorkerDeathIsAJobEvent: a SIGKILLed worker shows in the job's events
// as lost, with its id and the cause; a graceful leave is a "left" event
// and no loss.
func TestWorkerDeathIsAJobEvent(t *testing.T) {
	c, st := jobCluster(t, 3)
	for range 4 {
		c.Start()
	}
	c.WaitWorld(4, 30*time.Second)
	c.WaitSteps(10, 30*time.Second)
	var victim, leaver string
	for _, id := range c.Gen().Members {
		switch {
		case id == c.LeaderID():
		case victim == "":
			victim = id
		case leaver == "":
			leaver = id
		}
	}
	c.Signal(victim, syscall.SIGKILL)
	c.WaitWorld(3, 30*time.Second)
	c.WaitSteps(5, 30*time.Second)
	c.Signal(leaver, syscall.SIGTERM)
	if err := c.Wait(leaver, 30*time.Second); err != nil {
		t.Fatalf("graceful leave of %s: %v", leaver, err)
	}
	c.Finish(90 * time.Second)
	evs, err := st.Events(context.Background(), c.Job, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[string][]string{}
	left := map[string]bool{}
	for _, e := range evs {
		if e.Type != jobs.EventWorker {
			continue
		}
		w, _ := e.Data["worker"].(string)
		if e.Data["lost"] == true {
			cause, _ := e.Data["cause"].(string)
			lost[w] = append(lost[w], cause)
			if !strings.Contains(e.Message, w) || !strings.Contains(e.Message, "lost") {
				t.Errorf("lost event message %q does not name %s", e.Message, w)
			}
		}
		if e.Message == "worker "+w+" left" {
			left[w] = true
		}
	}
	if len(lost[victim]) != 1 || (lost[victim][0] != string(coord.LostHeartbeat) && lost[victim][0] != string(coord.LostNoReport)) {
		t.Errorf("lost events of the killed %s: %v, want one with a cause", victim, lost[victim])
	}
	if len(lost) != 1 {
		t.Errorf("lost events %v, want only the killed %s", lost, victim)
	}
	if !left[leaver] {
		t.Errorf("no left event for %s, which left gracefully", leaver)
	}
	c.CheckExactlyOnce()
}
