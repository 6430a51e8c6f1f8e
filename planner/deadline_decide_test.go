package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestDecideReservesDeadlineShares(t *testing.T) {
	tests := []struct {
		name   string
		nodes  []jobs.Node
		jobs   []JobState
		run    map[string]map[string]int // job -> placement now
		want   map[string]int
		reason map[string]string
	}{
		{
			name:  "deadline share first, the rest to the others",
			nodes: nodes("n", 2, 4, a100),
			jobs: []JobState{
				job("g", 1, 8),
				job("d", 0, 8, dl(30*time.Second, 1000, 10)),
				job("o", 1, 8, opportunistic()),
			},
			want:   map[string]int{"d": 4, "g": 4, "o": 0},
			reason: map[string]string{"d": "deadline: planned at 4 workers"},
		},
		{
			name:  "a running job without a deadline shrinks for it",
			nodes: nodes("n", 1, 4, a100),
			jobs: []JobState{
				job("g", 1, 4, func(j *JobState) { j.Priority = jobs.Guaranteed }),
				job("d", 0, 4, dl(60*time.Second, 1000, 10)),
			},
			run:  map[string]map[string]int{"g": {"n-0": 4}},
			want: map[string]int{"d": 2, "g": 2},
		},
		{
			name:  "it keeps its own GPUs",
			nodes: nodes("n", 2, 4, a100),
			jobs: []JobState{
				job("g", 1, 8, attained(0)),
				job("d", 0, 4, dl(30*time.Second, 1000, 10)),
			},
			run:  map[string]map[string]int{"d": {"n-1": 4}},
			want: map[string]int{"d": 4, "g": 4},
		},
		{
			name:  "later deadline waits while the GPUs are taken",
			nodes: nodes("n", 1, 4, a100),
			jobs: []JobState{
				job("a", 0, 4, dl(30*time.Second, 1000, 10)),
				job("b", 0, 4, dl(90*time.Second, 1000, 10)),
				job("g", 1, 4),
			},
			want: map[string]int{"a": 4, "b": 0, "g": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := deadlineSnap(0, tt.jobs...)
			s.Capacity = jobs.Capacity{Nodes: tt.nodes}
			for id, pl := range tt.run {
				running(&s, id, pl)
			}
			p := Decide(s, t0)
			if len(p.Targets) != len(s.Jobs) {
				t.Fatalf("%d targets for %d jobs", len(p.Targets), len(s.Jobs))
			}
			used := map[string]int{}
			for i, tg := range p.Targets {
				if tg.JobID != s.Jobs[i].ID {
					t.Fatalf("target %d is %s, want %s", i, tg.JobID, s.Jobs[i].ID)
				}
				if w, ok := tt.want[tg.JobID]; ok && tg.Workers != w {
					t.Errorf("%s: %d workers (%s), want %d", tg.JobID, tg.Workers, tg.Reason, w)
				}
				sum := 0
				for n, w := range tg.Placement {
					used[n] += w
					sum += w
				}
				if sum != tg.Workers {
					t.Errorf("%s: placement %v for %d workers", tg.JobID, tg.Placement, tg.Workers)
				}
			}
			for _, n := range tt.nodes {
				if used[n.ID] > n.GPUs {
					t.Errorf("node %s: %d workers on %d GPUs", n.ID, used[n.ID], n.GPUs)
				}
			}
			for id, want := range tt.reason {
				if tg, _ := p.Target(id); !strings.Contains(tg.Reason, want) {
					t.Errorf("%s: reason %q, want %q", id, tg.Reason, want)
				}
			}
			if tt.run["d"] != nil {
				if tg, _ := p.Target("d"); tg.Placement["n-1"] != 4 {
					t.Errorf("d moved: %v", tg.Placement)
				}
			}
		})
	}
}

func TestDecideWithoutDeadlineJobsIsUnchanged(t *testing.T) {
	s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 2, 4, a100)}, Jobs: []JobState{job("a", 1, 8), job("b", 2, 2)}}
	if _, ok := decideDeadlines(s, t0); ok {
		t.Fatal("pre-pass ran without deadline jobs")
	}
	p := Decide(s, t0)
	if workersOf(t, p, "a")+workersOf(t, p, "b") != 8 {
		t.Errorf("plan %+v", p.Targets)
	}
}
