package e2e

import (
	"syscall"
	"testing"
	"time"
)

func TestSubmitTrainsToSucceeded(t *testing.T) {
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "2")
	j := d.submit("alice", mlpJob("small", 1, 2, 8000, 2))
	if j.State != "pending" {
		t.Fatalf("new job state %q, want pending", j.State)
	}
	j = d.waitJob("alice", j.ID, 90*time.Second, "succeeded", func(j jobView) bool { return j.State == "succeeded" || j.State == "failed" })
	if j.State != "succeeded" {
		t.Fatalf("job ended %s (%s)", j.State, j.Reason)
	}
	if j.Progress.Samples != 2*8000 {
		t.Errorf("samples trained = %d, want every sample of 2 epochs once (16000)", j.Progress.Samples)
	}
	if j.Progress.Loss <= 0 || j.Progress.Loss > 1.3 {
		t.Errorf("final loss %.3f; want trained below ln(4)=1.39", j.Progress.Loss)
	}
	d.waitWorkerPids(0, 10*time.Second) // none left once the job succeeded
}

func TestScaleUpDownThenCancel(t *testing.T) {
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "3")
	j := d.submit("alice", mlpJob("long", 1, 3, 200000, 50))
	d.waitJob("alice", j.ID, 60*time.Second, "training", func(j jobView) bool { return j.State == "running" && j.Progress.Step > 0 })
	for _, n := range []int{1, 3, 2} {
		if code := d.do("alice", "POST", "/v1/jobs/"+j.ID+"/scale", map[string]int{"workers": n}, nil); code >= 300 {
			t.Fatalf("scale to %d: status %d", n, code)
		}
		got := d.waitJob("alice", j.ID, 60*time.Second, "world size", func(j jobView) bool { return j.Progress.WorldSize == n && j.Workers.Current == n })
		if got.State != "running" {
			t.Fatalf("after scale to %d state %s", n, got.State)
		}
		step := got.Progress.Step
		d.waitJob("alice", j.ID, 30*time.Second, "steps after resize", func(j jobView) bool { return j.Progress.Step > step+5 })
	}
	d.waitWorkerPids(2, 30*time.Second)
	// The progress history, written through the workers' own Redis login:
	// beside the points a resize forces, the thinned point a second (two
	// in a row at one world size); once every such point after a job's
	// first was refused to that login.
	deadline := time.Now().Add(30 * time.Second)
	for !steadyPoints(d.progress("alice", j.ID)) {
		if time.Now().After(deadline) {
			t.Fatalf("no two progress points in a row at one world size after 30s: %+v", d.progress("alice", j.ID))
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code := d.do("alice", "DELETE", "/v1/jobs/"+j.ID, nil, nil); code != 202 {
		t.Fatalf("cancel: status %d, want 202", code)
	}
	end := d.waitJob("alice", j.ID, 60*time.Second, "cancelled", func(j jobView) bool { return j.State == "cancelled" })
	d.waitWorkerPids(0, 10*time.Second) // none alive once cancelled
	// The history ends where the job did.
	if pts := d.progress("alice", j.ID); len(pts) == 0 || pts[len(pts)-1].Step != end.Progress.Step {
		t.Errorf("progress history %+v does not end at the job's last step %d", pts, end.Progress.Step)
	}
}

type progressPoint struct {
	Step       int64 `json:"step"`
	Epoch      int   `json:"epoch"`
	WorldSize  int   `json:"world_size"`
	Generation int64 `json:"generation"`
}

// progress is the job's progress history.
func (d *dev) progress(tenant, id string) []progressPoint {
	d.t.Helper()
	var page struct {
		Points []progressPoint `json:"points"`
	}
	if code := d.do(tenant, "GET", "/v1/jobs/"+id+"/progress", nil, &page); code != 200 {
		d.t.Fatalf("progress of %s: status %d", id, code)
	}
	return page.Points
}

// steadyPoints reports whether two points in a row share epoch, world
// size and generation: a point kept by the thinning, not forced by a
// change.
func steadyPoints(pts []progressPoint) bool {
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if a.Epoch == b.Epoch && a.WorldSize == b.WorldSize && a.Generation == b.Generation && a.Step != b.Step {
			return true
		}
	}
	return false
}

func TestTwoTenantsShareTheSlots(t *testing.T) {
	d := startDev(t, map[string]string{"alice": "tok-alice", "bob": "tok-bob"}, "--slots", "3")
	a := d.submit("alice", mlpJob("a", 1, 3, 200000, 50))
	d.waitJob("alice", a.ID, 60*time.Second, "3 workers", func(j jobView) bool { return j.Workers.Current == 3 && j.Progress.Step > 0 })
	b := d.submit("bob", mlpJob("b", 1, 3, 200000, 50))
	d.waitJob("bob", b.ID, 60*time.Second, "bob training", func(j jobView) bool { return j.Workers.Current >= 1 && j.Progress.Step > 0 })
	ga := d.waitJob("alice", a.ID, 30*time.Second, "alice shrunk", func(j jobView) bool { return j.Workers.Current < 3 })
	gb := d.get("bob", b.ID)
	if ga.Workers.Current+gb.Workers.Current > 3 {
		t.Fatalf("workers %d + %d exceed the 3 slots", ga.Workers.Current, gb.Workers.Current)
	}
	// Neither tenant sees the other's job.
	if code := d.do("bob", "GET", "/v1/jobs/"+a.ID, nil, nil); code != 404 {
		t.Errorf("bob reading alice's job: status %d, want 404", code)
	}
	d.do("alice", "DELETE", "/v1/jobs/"+a.ID, nil, nil)
	d.do("bob", "DELETE", "/v1/jobs/"+b.ID, nil, nil)
}

func TestKilledWorkerIsReplacedAndCtrlCLeavesNothing(t *testing.T) {
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "2")
	j := d.submit("alice", mlpJob("k", 2, 2, 200000, 50))
	d.waitJob("alice", j.ID, 60*time.Second, "2 workers training", func(j jobView) bool { return j.Progress.WorldSize == 2 && j.Progress.Step > 0 })
	pids := d.workerPids()
	if len(pids) != 2 {
		t.Fatalf("worker pids = %v, want 2", pids)
	}
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	before := d.get("alice", j.ID).Progress.Step
	d.waitJob("alice", j.ID, 60*time.Second, "replacement joined", func(j jobView) bool {
		ps := d.workerPids()
		return j.Progress.WorldSize == 2 && j.Progress.Step > before+10 && len(ps) == 2 && ps[0] != pids[1] && ps[1] != pids[1]
	})
	redis := d.redisPid()
	if redis == 0 {
		t.Fatal("child redis-server not found")
	}
	workers := d.workerPids()
	d.interrupt()
	for _, pid := range append(workers, redis) {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("pid %d alive after Ctrl-C of edl dev", pid)
		}
	}
}
