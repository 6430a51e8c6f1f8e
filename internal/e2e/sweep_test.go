package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs/sweep"
)

// A sweep of two trials on two slots under edl dev: the good trial (a
// small, fast model with a real learning rate) reaches the first rung
// first; the bad one (wide, slow, a learning rate that barely moves it)
// is cut there, and its slot goes to the good one, which grows stop-free
// to two workers. Then the sweep is cancelled, which cancels the trial.
func TestSweepCutsOneTrialAndGrowsTheOther(t *testing.T) {
	// Five epochs: on a quiet machine one epoch of the good trial takes
	// about 5 s, less than the planner needs to measure it and grow it.
	good := map[string]any{"model": map[string]any{"hidden": []any{32}}, "learning_rate": 0.3, "momentum": 0.9,
		"dataset": map[string]any{"seed": 3, "samples": 4000000, "features": 16, "classes": 4, "partitions": 64},
		"epochs":  5, "batch_size": 64}
	bad := map[string]any{"model": map[string]any{"hidden": []any{1024}}, "learning_rate": 1e-6, "momentum": 0,
		"dataset": map[string]any{"seed": 3, "samples": 4000000, "features": 16, "classes": 4, "partitions": 64},
		"epochs":  1, "batch_size": 64}
	spec := map[string]any{
		"name": "e2e-sweep",
		"template": map[string]any{"name": "trial", "workers": map[string]any{"min": 1, "max": 2},
			"trainer": map[string]any{"kind": "builtin", "builtin": good}},
		"parameters": map[string]any{"trainer.builtin": map[string]any{"type": "choice", "values": []any{good, bad}}},
		"num_trials": 2, "max_concurrent": 2,
		"metric":    map[string]any{"name": "loss", "mode": "min"},
		"scheduler": map[string]any{"kind": "asha", "grace": 20, "max": 1000000},
	}
	// The seed that gives trial 0 the good configuration, trial 1 the bad.
	var parsed sweep.Spec
	b, _ := json.Marshal(spec)
	if err := json.Unmarshal(b, &parsed); err != nil {
		t.Fatal(err)
	}
	seed := int64(-1)
	for s := int64(0); s < 100 && seed < 0; s++ {
		parsed.Seed = s
		lr := func(i int) float64 {
			return sweep.Sample(parsed, i)["trainer.builtin"].(map[string]any)["learning_rate"].(float64)
		}
		if lr(0) == 0.3 && lr(1) == 1e-6 {
			seed = s
		}
	}
	if seed < 0 {
		t.Fatal("no seed in 0..99 draws good then bad")
	}
	spec["seed"] = seed

	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "2")
	var sw sweep.Sweep
	if code := d.do("alice", "POST", "/v1/sweeps", spec, &sw); code != 201 {
		t.Fatalf("submit: %d", code)
	}
	get := func() sweep.Sweep {
		var s sweep.Sweep
		if code := d.do("alice", "GET", "/v1/sweeps/"+sw.ID, nil, &s); code != 200 {
			t.Fatalf("get: %d", code)
		}
		return s
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		sw = get()
		if sw.Trials[1].State == sweep.TrialCut && sw.Trials[0].Workers == 2 {
			break
		}
		if time.Now().After(deadline) || sw.State.Terminal() || sw.Trials[0].State.Ended() {
			t.Fatalf("no cut and growth: %s", describe(sw))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if sw.Best == nil || sw.Best.Trial != 0 {
		t.Fatalf("best: %+v", sw.Best)
	}
	// The grow is stop-free: the survivor's job reaches two workers.
	j := d.waitJob("alice", sw.Trials[0].JobID, 60*time.Second, "two workers", func(j jobView) bool {
		return j.Workers.Current == 2 && j.Progress.WorldSize == 2
	})
	if j.State != "running" {
		t.Fatalf("survivor's job: %+v", j)
	}
	cut := d.get("alice", sw.Trials[1].JobID)
	if cut.State != "cancelled" {
		t.Fatalf("cut trial's job: %s", cut.State)
	}

	if code := d.do("alice", "DELETE", "/v1/sweeps/"+sw.ID, nil, &sw); code != 202 {
		t.Fatalf("cancel: %d", code)
	}
	for deadline := time.Now().Add(60 * time.Second); sw.State != sweep.Cancelled; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sweep not cancelled: %s", describe(sw))
		}
		sw = get()
	}
	if st := d.get("alice", sw.Trials[0].JobID).State; st != "cancelled" {
		t.Fatalf("the survivor's job after the sweep's cancel: %s", st)
	}
	var page struct {
		Events []sweep.Event `json:"events"`
	}
	d.do("alice", "GET", "/v1/sweeps/"+sw.ID+"/events?limit=500", nil, &page)
	seen := map[sweep.EventType]int{}
	for _, e := range page.Events {
		seen[e.Type]++
	}
	if seen[sweep.EventStarted] != 2 || seen[sweep.EventCut] != 1 || seen[sweep.EventGrown] != 1 || seen[sweep.EventBestChanged] < 1 {
		t.Fatalf("events: %v", seen)
	}
}

func describe(sw sweep.Sweep) string {
	s := fmt.Sprintf("sweep %s %s:", sw.ID, sw.State)
	for _, t := range sw.Trials {
		m := "-"
		if t.LastMetric != nil {
			m = fmt.Sprintf("%.3f@%d", t.LastMetric.Value, t.LastMetric.Step)
		}
		s += fmt.Sprintf(" [%d %s rung %d workers %d %s %s]", t.Index, t.State, t.Rung, t.Workers, m, t.JobID)
	}
	return s
}
