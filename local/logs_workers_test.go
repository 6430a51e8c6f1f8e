package local

import (
	"context"
	"testing"

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
