package planner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// stragglerSnap is one running CPU job of len(speeds) workers w0, w1, ...
// on one node; speeds[i] < 0 means worker i published nothing.
func stragglerSnap(speeds []float64, opts ...func(*JobState)) Snapshot {
	j := job("a", len(speeds), len(speeds), gpw(0))
	j.Current = len(speeds)
	j.Placement = map[string]int{"n-0": len(speeds)}
	for i, ms := range speeds {
		w := WorkerSpeed{ID: fmt.Sprintf("w%d", i)}
		if ms >= 0 {
			w = WorkerSpeed{ID: w.ID, Published: true, StepMillis: ms, Generation: 4, WorldSize: len(speeds), At: t0.Add(-time.Second)}
		}
		j.Speeds = append(j.Speeds, w)
	}
	for _, o := range opts {
		o(&j)
	}
	n := nodes("n", 1, 0, jobs.GPUClass{})
	n[0].CPUSlots, n[0].FreeCPUSlots = 8, 8-len(speeds)
	c := DefaultConfig()
	c.Straggler = DefaultStragglerConfig()
	return Snapshot{Capacity: jobs.Capacity{Nodes: n}, Jobs: []JobState{j}, Config: c}
}

// planRounds runs Decide rounds times 2 s apart, carrying the slow counts
// like the loop does, and returns the last target. It changes s.
func planRounds(s Snapshot, rounds int) Target {
	var t Target
	now := t0
	for range rounds {
		p := Decide(s, now)
		t = p.Targets[0]
		s.Jobs[0].SlowRounds = t.SlowRounds
		now = now.Add(2 * time.Second)
		for k := range s.Jobs[0].Speeds {
			if w := &s.Jobs[0].Speeds[k]; w.Published && t0.Sub(w.At) < 5*time.Second {
				w.At = now.Add(-time.Second) // still publishing
			}
		}
	}
	return t
}

func TestDecideReplacesTheSlowestAfterRounds(t *testing.T) {
	s := stragglerSnap([]float64{100, 110, 300})
	if tg := planRounds(s, 2); tg.Replace != "" {
		t.Fatalf("replaced after 2 rounds: %q", tg.Replace)
	}
	tg := planRounds(stragglerSnap([]float64{100, 110, 300}), 3)
	if tg.Replace != "w2" || tg.Workers != 3 {
		t.Fatalf("target = %+v, want w2 replaced at 3 workers", tg)
	}
	want := "straggler: worker w2 at 2.7x the median step time (300 ms vs 110 ms, generation 4, 3 workers); replaced"
	if tg.ReplaceReason != want {
		t.Fatalf("reason = %q, want %q", tg.ReplaceReason, want)
	}
}

func TestDecideStragglerChoice(t *testing.T) {
	old := func(i int, age time.Duration) func(*JobState) {
		return func(j *JobState) { j.Speeds[i].At = t0.Add(-age) }
	}
	gen := func(i int, g int64) func(*JobState) { return func(j *JobState) { j.Speeds[i].Generation = g } }
	for _, tc := range []struct {
		name   string
		speeds []float64
		opts   []func(*JobState)
		want   string
	}{
		// A SIGSTOPped worker's last figure was fast; it stopped
		// publishing and is the one to go, not the healthy slower one.
		{"stopped publishing counts as slowest", []float64{100, 100, 170, 90}, []func(*JobState){old(3, time.Minute)}, "w3"},
		{"fast figure of an older generation is not compared", []float64{100, 100, 400, 20}, []func(*JobState){gen(3, 3)}, "w2"},
		{"slow figure of an older generation does not count", []float64{100, 100, 110, 900}, []func(*JobState){gen(3, 3)}, ""},
		{"two workers", []float64{100, 400}, nil, ""},
		{"too few measured", []float64{100, 400, -1}, nil, ""},
		{"within the factor", []float64{100, 100, 110, 150}, nil, ""},
		{"resized this round", []float64{100, 100, 400}, []func(*JobState){func(j *JobState) { j.Max = 4 }}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stragglerSnap(tc.speeds, tc.opts...)
			if tg := planRounds(s, 3); tg.Replace != tc.want {
				t.Fatalf("replace = %q (%s), want %q", tg.Replace, tg.ReplaceReason, tc.want)
			}
		})
	}
}

func TestDecideStragglerCooldownAndOff(t *testing.T) {
	s := stragglerSnap([]float64{100, 100, 400}, func(j *JobState) { j.LastReplace = t0.Add(-time.Minute) })
	if tg := planRounds(s, 5); tg.Replace != "" {
		t.Fatalf("replaced within the cooldown: %q", tg.Replace)
	}
	s = stragglerSnap([]float64{100, 100, 400})
	s.Config.Straggler = StragglerConfig{}
	if tg := planRounds(s, 5); tg.Replace != "" || tg.SlowRounds != nil {
		t.Fatalf("replacement off, got %+v", tg)
	}
	s = stragglerSnap([]float64{100, 100, 100}, func(j *JobState) { j.Speeds[0].At = t0.Add(-time.Hour) })
	tg := planRounds(s, 3)
	if tg.Replace != "w0" || !strings.Contains(tg.ReplaceReason, "stopped publishing") {
		t.Fatalf("target = %+v, want w0 replaced for silence", tg)
	}
}
