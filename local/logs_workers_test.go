package local

import (
	"context"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// Once a job was torn down its workers were forgotten: Workers was empty,
// so the API listed none and could not find a default log. They stay now,
// finished, with their exit codes, as long as their logs are kept, also
// for a new Cluster over the same LogDir (edl dev started again).
func TestFinishedJobKeepsItsWorkers(t *testing.T) {
	c, ctl := newTestCluster(t, 4)
	ctx := context.Background()
	if err := c.Scale(ctx, job("g"), 2, "test"); err != nil {
		t.Fatal(err)
	}
	live := waitWorkers(t, c, "g", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1" })
	waitTrapped(t, ctl, 0, 1)
	if err := c.Teardown(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	check := func(c *Cluster, what string) {
		t.Helper()
		ws := waitWorkers(t, c, "g", func(ws []jobs.Worker) bool {
			return len(ws) == 2 && !ws[0].State.Live() && !ws[1].State.Live()
		})
		for i, w := range ws {
			if w.ID != live[i].ID || w.Index != i || w.Node != "local" || w.State != jobs.WorkerComplete ||
				w.ExitCode == nil || *w.ExitCode != 0 || !w.Started.Equal(live[i].Started) {
				t.Errorf("%s: worker %d = %+v (exit %v), want %s complete with exit 0 started %s", what, i, w, w.ExitCode, live[i].ID, live[i].Started)
			}
		}
	}
	check(c, "after teardown")
	c.mu.Lock()
	_, held := c.jobs["g"]
	c.mu.Unlock()
	if held {
		t.Error("the torn-down job is still held in memory")
	}
	again, err := New(Config{Command: []string{"/bin/true"}, WorkerArgs: func(jobs.Job, int, string) []string { return nil }, LogDir: c.cfg.LogDir})
	if err != nil {
		t.Fatal(err)
	}
	check(again, "a new cluster over the same logs")
	if ws, err := again.Workers(ctx, "never-ran"); err != nil || len(ws) != 0 {
		t.Errorf("a job that never ran: %+v %v", ws, err)
	}
	if ws, err := again.Workers(ctx, "../g"); err != nil || len(ws) != 0 {
		t.Errorf("a job ID with a path in it: %+v %v", ws, err)
	}
}

// A job still running when edl dev stopped was settled as failed after the
// restart ("all 2 workers exited before the job finished (exit codes 0,
// 0)"): the workers Close stopped were listed as its finished workers. They
// are not its workers now, so the planner places the job again, and the
// new workers' IDs come after the old ones' (an ID is never reused: logs,
// exit records and Redis membership are by ID).
func TestWorkersStoppedByCloseAreNotTheJobsAfterARestart(t *testing.T) {
	c, ctl := newTestCluster(t, 4)
	ctx := context.Background()
	if err := c.Scale(ctx, job("r"), 2, "test"); err != nil {
		t.Fatal(err)
	}
	old := waitWorkers(t, c, "r", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1" })
	waitTrapped(t, ctl, 0, 1)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		t.Fatal(err)
	}
	again, err := New(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Close(context.Background()) })
	if ws, err := again.Workers(ctx, "r"); err != nil || len(ws) != 0 {
		t.Fatalf("after the restart the job has workers %+v (%v), want none", ws, err)
	}
	if err := again.Scale(ctx, job("r"), 2, "test"); err != nil {
		t.Fatal(err)
	}
	ws := waitWorkers(t, again, "r", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1" })
	for _, w := range ws {
		for _, o := range old {
			if w.ID == o.ID {
				t.Fatalf("new worker %s reuses an old worker's ID", w.ID)
			}
		}
	}
}

// A running job that had shrunk (its drained worker exited 0), lost a
// worker to a crash (restarted) and had one replaced was settled as failed
// after edl dev was killed and started again ("all 1 workers exited before
// the job finished (exit codes 0)"): the new cluster listed the exit
// records of those workers, which left while the job went on, as the
// job's workers (its live ones, killed with edl dev, have no record), so
// the planner saw every worker exited and never placed the job again.
// Such workers are not the job's after a restart.
func TestWorkersThatLeftARunningJobAreNotItsAfterAKill(t *testing.T) {
	c, ctl := newTestCluster(t, 8)
	ctx := context.Background()
	if err := c.Scale(ctx, job("k"), 3, "test"); err != nil {
		t.Fatal(err)
	}
	ws := waitWorkers(t, c, "k", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1,2" })
	waitTrapped(t, ctl, 0, 1, 2)
	gone := func(n int) func([]jobs.Worker) bool {
		return func(ws []jobs.Worker) bool {
			g := 0
			for _, w := range ws {
				if !w.State.Live() {
					g++
				}
			}
			return g == n && liveIndexes(ws) == "0,1"
		}
	}
	if err := c.Scale(ctx, job("k"), 2, "shrink"); err != nil { // index 2 drained: exits 0
		t.Fatal(err)
	}
	waitWorkers(t, c, "k", gone(1))
	if err := c.StopWorker(ctx, "k", ws[0].ID, "straggler"); err != nil { // replaced
		t.Fatal(err)
	}
	waitWorkers(t, c, "k", gone(2))
	exitWith(t, ctl, 1, 3) // index 1 crashes and is restarted
	waitWorkers(t, c, "k", gone(3))
	// edl dev SIGKILLed: the live workers leave no exit record; a new
	// cluster reads the same logs.
	again, err := New(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ws, err := again.Workers(ctx, "k"); err != nil || len(ws) != 0 {
		t.Fatalf("after the restart the running job has workers %+v (%v), want none", ws, err)
	}
}
