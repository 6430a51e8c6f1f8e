package planner

import (
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

func TestQueueOf(t *testing.T) {
	multi := Config{QueueThreshold: 3600, QueueLevels: 4, QueueFactor: 2}
	two := Config{QueueThreshold: 3600}
	tests := []struct {
		name     string
		c        Config
		attained float64
		want     int
	}{
		{"below the threshold", multi, 3599, 0},
		{"at the threshold", multi, 3600, 1},
		{"second bound (x2)", multi, 7200, 2},
		{"last queue has no bound", multi, 1e9, 3},
		{"just below the last bound", multi, 14399, 2},
		{"two levels by default", two, 1e9, 1},
		{"factor 0 means 4", Config{QueueThreshold: 100, QueueLevels: 3}, 399, 1},
		{"factor 0 means 4, next queue", Config{QueueThreshold: 100, QueueLevels: 3}, 400, 2},
		{"negative threshold: one queue", Config{QueueThreshold: -1, QueueLevels: 8}, 1e9, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.queueOf(tc.attained); got != tc.want {
				t.Errorf("queueOf(%g) = %d, want %d", tc.attained, got, tc.want)
			}
		})
	}
}

// With more than two queues a job with less attained service preempts one
// with more, even when both are past the first threshold; with Tiresias'
// two levels the running one keeps its GPUs (same queue, running first).
func TestDecideMultiLevelQueues(t *testing.T) {
	snap := func(levels int) Snapshot {
		s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 4, v100)},
			Jobs: []JobState{job("old", 4, 4, attained(10*3600)), job("new", 4, 4, attained(2*3600), submitted(1))}}
		running(&s, "old", map[string]int{"n-0": 4})
		s.Config = DefaultConfig()
		s.Config.QueueLevels = levels
		return s
	}
	for _, tc := range []struct {
		levels        int
		wantOld, want int
	}{{levels: 2, wantOld: 4, want: 0}, {levels: 8, wantOld: 0, want: 4}} {
		s := snap(tc.levels)
		p := Decide(s, t0)
		if err := checkPlan(s, p); err != nil {
			t.Fatal(err)
		}
		if o, n := workersOf(t, p, "old"), workersOf(t, p, "new"); o != tc.wantOld || n != tc.want {
			t.Errorf("%d levels: old %d, new %d workers; want %d and %d", tc.levels, o, n, tc.wantOld, tc.want)
		}
	}
}

// HarvestFirst starts an opportunistic job on its minimum before a
// guaranteed job past the first queue grows past its own; a guaranteed job
// still in the first queue grows first. Without HarvestFirst the
// guaranteed job takes every spare GPU. A guaranteed minimum still takes
// GPUs back.
func TestDecideHarvestFirst(t *testing.T) {
	base := func(harvest bool, attainedS float64) Snapshot {
		s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
			Jobs: []JobState{job("g", 2, 8, attained(attainedS)), job("o", 2, 4, opportunistic())}}
		running(&s, "g", map[string]int{"n-0": 2})
		s.Config = DefaultConfig()
		s.Config.HarvestFirst = harvest
		return s
	}
	for _, tc := range []struct {
		harvest  bool
		attained float64
		g, o     int
	}{
		{harvest: true, attained: 2 * 3600, g: 6, o: 2},
		{harvest: true, attained: 0, g: 8, o: 0},
		{harvest: false, attained: 2 * 3600, g: 8, o: 0},
	} {
		s := base(tc.harvest, tc.attained)
		p := Decide(s, t0)
		if err := checkPlan(s, p); err != nil {
			t.Fatal(err)
		}
		if g, o := workersOf(t, p, "g"), workersOf(t, p, "o"); g != tc.g || o != tc.o {
			t.Errorf("harvest first %v, attained %g s: g %d, o %d; want %d and %d", tc.harvest, tc.attained, g, o, tc.g, tc.o)
		}
	}

	// A guaranteed job whose minimum needs the harvested GPUs gets them.
	s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
		Jobs: []JobState{job("g", 8, 8), job("o", 2, 8, opportunistic())}}
	running(&s, "o", map[string]int{"n-0": 8})
	p := Decide(s, t0)
	if err := checkPlan(s, p); err != nil {
		t.Fatal(err)
	}
	tg, _ := p.Target("o")
	if workersOf(t, p, "g") != 8 || tg.Workers != 0 || !tg.Suspend {
		t.Errorf("g %d, o %+v: want g on all 8 GPUs and o suspended", workersOf(t, p, "g"), tg)
	}
}

func TestConfigValidateQueues(t *testing.T) {
	c := DefaultConfig()
	c.QueueLevels, c.QueueFactor = -1, 0.5
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "queue_levels -1") || !strings.Contains(err.Error(), "queue_factor 0.5") {
		t.Errorf("Validate() = %v, want errors naming queue_levels and queue_factor", err)
	}
}
