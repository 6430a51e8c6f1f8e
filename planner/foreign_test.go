package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// foreignNode is an 8-GPU node on which other Nomad jobs (not edl's) hold
// foreign GPUs and edl's own workers edl of the others, as Capacity read it.
func foreignNode(id string, foreign, edl int) jobs.Node {
	return jobs.Node{ID: id, Name: id, Class: a100, GPUs: 8, FreeGPUs: 8 - foreign - edl, ForeignGPUs: foreign,
		CPUSlots: 4, FreeCPUSlots: 4}
}

// placed says job j's workers are on the nodes (the nodes' free counts
// already leave them out).
func placed(place map[string]int) func(*JobState) {
	return func(j *JobState) {
		j.Placement, j.Current = place, 0
		for _, w := range place {
			j.Current += w
		}
	}
}

// A deadline job admitted on an empty cluster is refused when other Nomad
// jobs hold the GPUs it needs, and the reason says so; admitted again once
// they let them go. Through AdmitJob, what POST /v1/jobs asks.
func TestAdmitJobCountsOnlyGPUsForeignJobsDoNotHold(t *testing.T) {
	// 8000 samples at 100/s a worker (linear prior), due in 30 s: 3 workers
	// at least (26.7 s), so it needs 3 of the 8 GPUs.
	spec := jobs.Spec{Within: "30s", PerWorkerSpeed: 100, GPUsPerWorker: 1,
		Workers: jobs.WorkerRange{Min: 1, Max: 8}}
	spec.Trainer.Builtin = &jobs.BuiltinTrainer{Epochs: 1, Dataset: jobs.SyntheticDataset{Samples: 8000}}
	cfg := DefaultConfig()
	cfg.CommRatio = 0
	for _, tc := range []struct {
		name    string
		node    jobs.Node
		admit   bool
		workers int
		why     string
	}{
		{"empty cluster", foreignNode("n", 0, 0), true, 3, ""},
		{"other Nomad jobs hold 6 of 8 GPUs", foreignNode("n", 6, 0), false, 0,
			"(other Nomad jobs hold 6 of the cluster's 8 GPUs: only 2 are counted)"},
		{"other Nomad jobs hold 5 of 8 GPUs: 3 are enough", foreignNode("n", 5, 0), true, 3, ""},
		{"they let them go (the next read)", foreignNode("n", 0, 0), true, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := AdmitJob(jobs.Capacity{Nodes: []jobs.Node{tc.node}}, nil, spec, cfg, t0)
			if a.Admitted != tc.admit {
				t.Fatalf("admitted %v (%s), want %v", a.Admitted, a.Reason, tc.admit)
			}
			if tc.admit && a.Workers != tc.workers {
				t.Errorf("workers %d, want %d", a.Workers, tc.workers)
			}
			if !strings.Contains(a.Reason, tc.why) {
				t.Errorf("reason %q, want it to say %q", a.Reason, tc.why)
			}
		})
	}
}

// Admit with an admitted job: the GPUs foreign jobs hold leave no room
// for the second one, though the cluster's 8 GPUs would.
func TestAdmitForeignGPUsLeaveNoRoomBesideAnAdmittedJob(t *testing.T) {
	a := job("a", 0, 4, dl(30*time.Second, 1000, 10), func(j *JobState) { j.Deadline.Share = 4 })
	cand := job("b", 0, 8, dl(30*time.Second, 1000, 10))
	s := deadlineSnap(8, a)
	if got := Admit(s, cand, t0); !got.Admitted || got.Workers != 4 {
		t.Fatalf("on 8 free GPUs: %+v, want admitted at 4", got)
	}
	s.Capacity.Nodes = []jobs.Node{foreignNode("n-0", 4, 0)}
	got := Admit(s, cand, t0)
	if got.Admitted || !strings.Contains(got.Reason, "other Nomad jobs hold 4 of the cluster's 8 GPUs") {
		t.Errorf("with 4 GPUs held by other Nomad jobs: %+v, want refused, saying so", got)
	}
}

// Decide does not plan onto GPUs that foreign allocations hold, neither
// for deadline jobs (their plan and its feasibility count only the other
// GPUs) nor for elastic ones (a node offers at most its GPUs less the
// foreign ones, never less than what edl's own workers hold there).
func TestDecideLeavesForeignGPUsAlone(t *testing.T) {
	tests := []struct {
		name     string
		nodes    []jobs.Node
		jobs     []JobState
		want     map[string]int
		feasible map[string]bool
		reason   map[string]string
	}{
		{
			name:     "deadline job on an empty node",
			nodes:    []jobs.Node{foreignNode("n", 0, 0)},
			jobs:     []JobState{job("d", 0, 8, dl(30*time.Second, 1000, 10))},
			want:     map[string]int{"d": 4},
			feasible: map[string]bool{"d": true},
		},
		{
			name:     "deadline job where other Nomad jobs hold 6 GPUs: at risk, and the plan says why",
			nodes:    []jobs.Node{foreignNode("n", 6, 0)},
			jobs:     []JobState{job("d", 0, 8, dl(30*time.Second, 1000, 10))},
			want:     map[string]int{"d": 2},
			feasible: map[string]bool{"d": false},
			reason:   map[string]string{"d": "other Nomad jobs hold 6 of the cluster's 8 GPUs"},
		},
		{
			name:  "elastic job grows only onto the GPUs nobody else holds",
			nodes: []jobs.Node{foreignNode("n", 5, 2)},
			jobs:  []JobState{job("g", 1, 8, placed(map[string]int{"n": 2}))},
			want:  map[string]int{"g": 3},
		},
		{
			// Workers read a moment after the capacity: g's third worker
			// took the GPU the read still counted free. The node has 3
			// GPUs that are not foreign, not 4.
			name:  "a placement newer than the capacity read does not spill onto foreign GPUs",
			nodes: []jobs.Node{foreignNode("n", 5, 2)},
			jobs:  []JobState{job("g", 1, 8, placed(map[string]int{"n": 3}))},
			want:  map[string]int{"g": 3},
		},
		{
			// The other way round: a foreign job left after the capacity
			// read and g's queued worker took its GPU: g keeps it.
			name:  "edl's own workers are never cut by the foreign count",
			nodes: []jobs.Node{foreignNode("n", 6, 2)},
			jobs:  []JobState{job("g", 1, 8, placed(map[string]int{"n": 3}))},
			want:  map[string]int{"g": 3},
		},
		{
			name:  "two nodes: the foreign-held one gets nothing new",
			nodes: []jobs.Node{foreignNode("a", 8, 0), foreignNode("b", 0, 0)},
			jobs:  []JobState{job("g", 1, 16)},
			want:  map[string]int{"g": 8},
		},
		{
			name:  "foreign jobs gone: all 8 usable at the next round",
			nodes: []jobs.Node{foreignNode("n", 0, 2)},
			jobs:  []JobState{job("g", 1, 8, placed(map[string]int{"n": 2}))},
			want:  map[string]int{"g": 8},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := deadlineSnap(1, tt.jobs...)
			s.Capacity.Nodes = tt.nodes
			p := Decide(s, t0)
			used := map[string]int{}
			for _, tg := range p.Targets {
				if w, ok := tt.want[tg.JobID]; ok && tg.Workers != w {
					t.Errorf("job %s: %d workers (%s), want %d", tg.JobID, tg.Workers, tg.Reason, w)
				}
				if f, ok := tt.feasible[tg.JobID]; ok && (tg.Deadline == nil || tg.Deadline.Feasible != f) {
					t.Errorf("job %s: deadline plan %+v, want feasible %v", tg.JobID, tg.Deadline, f)
				}
				if r, ok := tt.reason[tg.JobID]; ok && !strings.Contains(tg.Reason, r) {
					t.Errorf("job %s: reason %q, want it to say %q", tg.JobID, tg.Reason, r)
				}
				for n, w := range tg.Placement {
					used[n] += w
				}
			}
			for _, n := range tt.nodes {
				own := 0
				for _, j := range tt.jobs {
					own += j.Placement[n.ID]
				}
				if limit := max(n.GPUs-n.ForeignGPUs, own); used[n.ID] > limit {
					t.Errorf("node %s: %d GPUs planned, but other Nomad jobs hold %d of its %d (edl's workers %d)",
						n.ID, used[n.ID], n.ForeignGPUs, n.GPUs, own)
				}
			}
		})
	}
}
