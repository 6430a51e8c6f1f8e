package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestDecideTable(t *testing.T) {
	type want struct {
		workers map[string]int
		reason  map[string]string // substring of the reason
		suspend map[string]bool
	}
	tests := []struct {
		name  string
		snap  func() Snapshot
		want  want
		extra func(t *testing.T, s Snapshot, p Plan)
	}{
		{
			name: "one job gets its minimum then spare GPUs up to max",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 2, 8, v100)},
					Jobs: []JobState{job("a", 2, 6)}}
			},
			want: want{workers: map[string]int{"a": 6}, reason: map[string]string{"a": "start with 6 workers"}},
		},
		{
			name: "gang minimum that does not fit waits",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 4, v100)},
					Jobs: []JobState{job("big", 3, 3, gpw(2)), job("small", 1, 1)}}
				return s
			},
			want: want{workers: map[string]int{"big": 0, "small": 1},
				reason: map[string]string{"big": "3 workers (6 GPUs) do not fit"}},
		},
		{
			name: "multi-GPU workers only land where a node has that many free",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 3, 4, v100)},
					Jobs: []JobState{job("x", 1, 1), job("y", 1, 1, submitted(time.Second)),
						job("z", 1, 1, submitted(2*time.Second)), job("q", 1, 4, gpw(4), submitted(3*time.Second))}}
				running(&s, "x", map[string]int{"n-0": 1})
				running(&s, "y", map[string]int{"n-1": 1})
				running(&s, "z", map[string]int{"n-2": 1})
				return s
			},
			// 9 GPUs free, but no node has 4: the 4-GPU job waits.
			want: want{workers: map[string]int{"q": 0, "x": 1, "y": 1, "z": 1}},
		},
		{
			name: "GPU class constraints: model and minimum memory",
			snap: func() Snapshot {
				ns := append(nodes("v", 1, 8, v100), nodes("a", 1, 4, a100)...)
				return Snapshot{Capacity: jobs.Capacity{Nodes: ns},
					Jobs: []JobState{job("needs-a100", 1, 8, constraint("A100", 0)),
						job("needs-40g", 1, 8, constraint("", 40000), submitted(time.Second)),
						job("needs-h100", 1, 1, constraint("H100", 0))}}
			},
			// Both fit only the 4 A100s and split them by marginal gain.
			want: want{workers: map[string]int{"needs-a100": 2, "needs-40g": 2, "needs-h100": 0},
				reason: map[string]string{"needs-h100": "no node matches its GPU constraint (model=H100)"}},
			extra: func(t *testing.T, s Snapshot, p Plan) {
				for _, id := range []string{"needs-a100", "needs-40g"} {
					if tg, _ := p.Target(id); tg.Placement["a-0"] != 2 || len(tg.Placement) != 1 {
						t.Errorf("%s placement %v, want 2 on a-0 only", id, tg.Placement)
					}
				}
			},
		},
		{
			name: "guaranteed arrival shrinks opportunistic work first",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
					Jobs: []JobState{job("harvest", 2, 8, opportunistic()), job("g", 4, 4, submitted(time.Hour))}}
				running(&s, "harvest", map[string]int{"n-0": 8})
				return s
			},
			want: want{workers: map[string]int{"harvest": 4, "g": 4},
				reason: map[string]string{"harvest": "capacity wanted by guaranteed jobs"}},
		},
		{
			name: "opportunistic job is suspended when its minimum is wanted",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
					Jobs: []JobState{job("harvest", 4, 8, opportunistic()), job("g", 6, 6, submitted(time.Hour))}}
				running(&s, "harvest", map[string]int{"n-0": 8})
				return s
			},
			want: want{workers: map[string]int{"harvest": 0, "g": 6}, suspend: map[string]bool{"harvest": true},
				reason: map[string]string{"harvest": "suspend (had 8)"}},
		},
		{
			name: "compaction: a running job shrinks so a waiting one starts",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
					Jobs: []JobState{job("a", 2, 8), job("b", 4, 8, submitted(time.Hour))}}
				running(&s, "a", map[string]int{"n-0": 8})
				return s
			},
			want: want{workers: map[string]int{"a": 4, "b": 4}},
			extra: func(t *testing.T, s Snapshot, p Plan) {
				if !p.Compacted {
					t.Error("plan not compacted")
				}
			},
		},
		{
			name: "without waiting jobs a running job keeps its size",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 16, v100)},
					Jobs: []JobState{job("a", 2, 8), job("b", 4, 16, submitted(time.Hour))}}
				running(&s, "a", map[string]int{"n-0": 8})
				return s
			},
			want: want{workers: map[string]int{"a": 8, "b": 8}, reason: map[string]string{"a": "keep 8"}},
		},
		{
			name: "cooldown: a job that just resized keeps its size through compaction",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
					Jobs: []JobState{job("a", 1, 6, resized(10*time.Second)), job("b", 1, 2), job("c", 2, 2, submitted(time.Hour))}}
				running(&s, "a", map[string]int{"n-0": 6})
				running(&s, "b", map[string]int{"n-0": 2})
				return s
			},
			// Compaction: a 1, b 1, c 2; a (cooling) back to 6: b stays at 1.
			want: want{workers: map[string]int{"a": 5, "b": 1, "c": 2}},
		},
		{
			name: "Tiresias: less attained service first, whatever the arrival",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 4, v100)},
					Jobs: []JobState{job("old", 4, 4, attained(1e6)), job("new", 4, 4, submitted(time.Hour))}}
				running(&s, "old", map[string]int{"n-0": 4})
				return s
			},
			want: want{workers: map[string]int{"old": 0, "new": 4}, suspend: map[string]bool{"old": true},
				reason: map[string]string{"old": "preempted by higher-priority claims"}},
		},
		{
			name: "tenant fairness: the tenant with the smaller share goes first",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 6, v100)},
					Tenants: []TenantShare{{Name: "x", Weight: 1}, {Name: "y", Weight: 1}},
					Jobs: []JobState{job("x1", 2, 2, tenantOf("x")), job("x2", 2, 2, tenantOf("x"), submitted(time.Second)),
						job("y1", 2, 2, tenantOf("y"), submitted(time.Hour)), job("x3", 2, 2, tenantOf("x"), submitted(2*time.Second))}}
			},
			want: want{workers: map[string]int{"x1": 2, "y1": 2, "x2": 2, "x3": 0}},
		},
		{
			name: "quota caps a tenant's guaranteed jobs",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 2, 8, v100)},
					Tenants: []TenantShare{{Name: "t", QuotaGPUs: 6}},
					Jobs:    []JobState{job("a", 2, 8), job("b", 2, 2, submitted(time.Second)), job("c", 2, 2, submitted(2*time.Second))}}
			},
			want: want{workers: map[string]int{"a": 2, "b": 2, "c": 2}},
		},
		{
			name: "quota reached: the next job waits with the reason",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 2, 8, v100)},
					Tenants: []TenantShare{{Name: "t", QuotaGPUs: 4}},
					Jobs:    []JobState{job("a", 4, 8), job("b", 1, 1, submitted(time.Second)), job("o", 1, 16, opportunistic())}}
			},
			want: want{workers: map[string]int{"a": 4, "b": 0, "o": 12},
				reason: map[string]string{"b": "tenant t quota 4 reached"}},
		},
		{
			name: "pinned size is exact",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
					Jobs: []JobState{job("p", 1, 8, pinned(3)), job("q", 1, 2)}}
			},
			want: want{workers: map[string]int{"p": 3, "q": 2}},
		},
		{
			name: "a running job pinned above its size keeps its workers until the pin fits",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 4, v100)},
					Jobs: []JobState{job("q", 3, 3), job("p", 1, 8, pinned(3), submitted(time.Second))}}
				running(&s, "p", map[string]int{"n-0": 1})
				running(&s, "q", map[string]int{"n-0": 3})
				return s
			},
			want: want{workers: map[string]int{"p": 1, "q": 3},
				reason: map[string]string{"p": "keep 1 workers until the 3 pinned by the tenant fit: 3 workers (3 GPUs) do not fit"}},
		},
		{
			name: "a running job pinned above its size grows toward the pin as room frees",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 4, v100)},
					Jobs: []JobState{job("p", 1, 8, pinned(3))}}
				running(&s, "p", map[string]int{"n-0": 1})
				s.Capacity.Nodes[0].FreeGPUs -= 2 // held by stopping workers of no job
				return s
			},
			want: want{workers: map[string]int{"p": 2},
				reason: map[string]string{"p": "grow 1 -> 2 toward the 3 pinned by the tenant"}},
		},
		{
			name: "CPU-only jobs use CPU slots, not GPUs",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 2, 1, v100)},
					Jobs: []JobState{job("cpu", 1, 20, gpw(0)), job("gpu", 1, 20)}}
			},
			want: want{workers: map[string]int{"cpu": 8, "gpu": 2}, reason: map[string]string{"cpu": "8 CPU slots"}},
		},
		{
			name: "spare GPUs go to the job that scales better",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
					Jobs: []JobState{
						job("flat", 1, 8, throughput(map[int]float64{1: 100, 2: 110, 4: 120})),
						job("linear", 1, 8, throughput(map[int]float64{1: 100, 2: 200, 4: 400}))}}
			},
			want: want{workers: map[string]int{"flat": 1, "linear": 7}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.snap()
			p := Decide(s, t0)
			if err := checkPlan(s, p); err != nil {
				t.Fatalf("property violated: %v\nplan: %+v", err, p)
			}
			for id, w := range tc.want.workers {
				if got := workersOf(t, p, id); got != w {
					t.Errorf("%s: %d workers, want %d (reason %q)", id, got, w, reasonOf(p, id))
				}
			}
			for id, r := range tc.want.reason {
				if got := reasonOf(p, id); !strings.Contains(got, r) {
					t.Errorf("%s: reason %q, want it to contain %q", id, got, r)
				}
			}
			for id, sus := range tc.want.suspend {
				if tg, _ := p.Target(id); tg.Suspend != sus {
					t.Errorf("%s: suspend %v, want %v", id, tg.Suspend, sus)
				}
			}
			if tc.extra != nil {
				tc.extra(t, s, p)
			}
		})
	}
}

func reasonOf(p Plan, id string) string {
	tg, _ := p.Target(id)
	return tg.Reason
}

func TestDecideRecheckIsCooldownEnd(t *testing.T) {
	s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 8, v100)},
		Jobs: []JobState{job("a", 1, 4, resized(30*time.Second)), job("b", 1, 4, resized(90*time.Second))}}
	running(&s, "a", map[string]int{"n-0": 2})
	running(&s, "b", map[string]int{"n-0": 2})
	p := Decide(s, t0)
	want := t0.Add(DefaultConfig().Cooldown - 90*time.Second)
	if !p.Recheck.Equal(want) {
		t.Errorf("recheck %v, want %v", p.Recheck, want)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	bad := DefaultConfig()
	bad.Horizon = 0
	bad.CommRatio = 2
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "horizon") || !strings.Contains(err.Error(), "comm_ratio") {
		t.Errorf("Validate() = %v, want errors naming horizon and comm_ratio", err)
	}
}
