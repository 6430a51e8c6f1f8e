package planner

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestEstimateMoved(t *testing.T) {
	for _, tt := range []struct {
		assumed, measured float64
		want              bool
	}{
		{100, 110, false}, {100, 90, false}, {100, 116, true}, {100, 84, true},
		{0, 5, true}, {100, 0, false}, {0, 0, false},
	} {
		if got := EstimateMoved(tt.assumed, tt.measured); got != tt.want {
			t.Errorf("EstimateMoved(%g, %g) = %v, want %v", tt.assumed, tt.measured, got, tt.want)
		}
	}
}

func TestReplanShrinksAJobThatGotFaster(t *testing.T) {
	// a was planned at 4 workers from a prior of 10/s per worker; it
	// measures 20/s per worker at 4, so 2 workers do now.
	s := deadlineSnap(4, job("a", 0, 4, dl(60*time.Second, 1000, 10)))
	s.Jobs[0].Deadline.Share = 4
	s.Jobs[0].Current = 4
	s.Jobs[0].Throughput = map[int]float64{4: 80}
	if a, _ := PlanDeadlines(s, t0).Target("a"); a.Share != 4 {
		t.Fatalf("with its floor a is planned at %d, want 4", a.Share)
	}
	if _, ok := Replan(s, nil, t0); ok {
		t.Error("Replan cleared a floor with nothing moved")
	}
	r, ok := Replan(s, []string{"a"}, t0)
	if !ok {
		t.Fatal("Replan kept a's floor")
	}
	a, _ := PlanDeadlines(r, t0).Target("a")
	if a.Share >= 4 || !a.Feasible {
		t.Errorf("re-planned a: %+v, want fewer than 4 workers and in time", a)
	}
	if s.Jobs[0].Deadline.Share != 4 {
		t.Error("Replan changed its argument")
	}
}

// TestReplanKeepsStrictPlans: over random sets of planned deadline jobs
// whose floors are cleared at random, Replan never makes a strict job that
// its plan finished in time late.
func TestReplanKeepsStrictPlans(t *testing.T) {
	shrunk := 0
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		s := deadlineSnap(4 + r.IntN(12))
		for i := range 2 + r.IntN(5) {
			j := randomDeadlineJob(r, string(rune('a'+i)), t0)
			j.Deadline.BestEffort = r.IntN(4) == 0
			s.Jobs = append(s.Jobs, j)
		}
		// Plan once, keep the shares as floors, then let some jobs turn
		// out faster or slower than their prior.
		for _, tg := range PlanDeadlines(s, t0).Targets {
			s.Jobs[jobIndex(s.Jobs, tg.JobID)].Deadline.Share = tg.Share
		}
		before := PlanDeadlines(s, t0)
		var moved []string
		for i := range s.Jobs {
			if r.IntN(2) == 0 {
				j := &s.Jobs[i]
				j.Throughput = map[int]float64{1: j.Deadline.PriorSamplesPerS * (0.5 + 1.5*r.Float64())}
				moved = append(moved, j.ID)
			}
		}
		withFloors := PlanDeadlines(s, t0)
		got, ok := Replan(s, moved, t0)
		after := PlanDeadlines(got, t0)
		for i, b := range withFloors.Targets {
			j := s.Jobs[jobIndex(s.Jobs, b.JobID)]
			if b.Feasible && !after.Targets[i].Feasible && !j.Deadline.BestEffort {
				t.Fatalf("seed %d: Replan made strict job %s late: %+v (before %+v)", seed, b.JobID, after.Targets[i], before.Targets[i])
			}
			if ok && after.Targets[i].Share < b.Share {
				shrunk++
			}
		}
	}
	if shrunk == 0 {
		t.Error("no re-plan gave any job a smaller share: the test shows nothing")
	}
}

// A deadline job whose work is done keeps its workers until they end it:
// suspending it then would leave it suspended for good.
func TestDoneDeadlineJobKeepsItsWorkers(t *testing.T) {
	s := deadlineSnap(4, job("a", 0, 4, dl(60*time.Second, 0, 10)), job("g", 1, 4))
	s.Jobs[0].Current = 2
	running(&s, "a", map[string]int{"n-0": 2})
	p := Decide(s, t0)
	if a, _ := p.Target("a"); a.Workers != 2 || a.Suspend {
		t.Errorf("done job: %+v, want its 2 workers kept", a)
	}
	if g, _ := p.Target("g"); g.Workers != 2 {
		t.Errorf("the other job gets %d, want the 2 left", g.Workers)
	}
}

// AdmitJob's earliest_feasible holds for a resubmission a few seconds
// later (ResubmitMargin), where Admit's is exact for now.
func TestAdmitJobEarliestFeasibleHoldsForAResubmission(t *testing.T) {
	capa := jobs.Capacity{Nodes: []jobs.Node{{ID: "n", CPUSlots: 4, FreeCPUSlots: 4}}}
	running := jobs.Job{ID: "a", State: jobs.Running, CreatedAt: t0, Workers: jobs.WorkerCount{Current: 2, Target: 2}}
	running.Spec.Within, running.Spec.PerWorkerSpeed = "20s", 100
	running.Spec.Workers = jobs.WorkerRange{Min: 1, Max: 4}
	running.Spec.Trainer.Builtin = &jobs.BuiltinTrainer{Epochs: 1, Dataset: jobs.SyntheticDataset{Samples: 2000}}
	spec := running.Spec
	spec.Trainer.Builtin = &jobs.BuiltinTrainer{Epochs: 1, Dataset: jobs.SyntheticDataset{Samples: 8000}}
	spec.Within = "25s"
	cfg := DefaultConfig()
	a := AdmitJob(capa, []jobs.Job{running}, spec, cfg, t0)
	if a.Admitted || a.EarliestFeasible.IsZero() {
		t.Fatalf("admission %+v, want refused with an earliest feasible deadline", a)
	}
	exact := Admit(Snapshot{Capacity: capa, Config: cfg, Jobs: []JobState{{ID: "a", Min: 1, Max: 4, Current: 2,
		Deadline: DeadlineOf(running, 2)}}}, JobState{ID: "new", Min: 1, Max: 4, Deadline: DeadlineOf(jobs.Job{Spec: spec, CreatedAt: t0}, 0)}, t0)
	if a.EarliestFeasible.Before(exact.EarliestFeasible) {
		t.Errorf("AdmitJob's earliest feasible %s is before Admit's %s", a.EarliestFeasible, exact.EarliestFeasible)
	}
	spec.Within, spec.Deadline = "", &a.EarliestFeasible
	for _, after := range []time.Duration{0, time.Second, ResubmitMargin - time.Second} {
		if b := AdmitJob(capa, []jobs.Job{running}, spec, cfg, t0.Add(after)); !b.Admitted {
			t.Errorf("resubmitted %s later with deadline %s: refused: %s", after, a.EarliestFeasible.Sub(t0), b.Reason)
		}
	}
}

// TestReplanShrinksOnlyWithAMargin: a job that got faster is not shrunk to
// a share that would finish just in time, but to the least one that leaves
// DeadlineMargin, and not at all when only its current share does.
func TestReplanShrinksOnlyWithAMargin(t *testing.T) {
	// 1000 samples due in 55 s, measured 20/s per worker at 4 workers: one
	// worker finishes 5 s early (inside the 10 s margin), two 30 s early.
	s := deadlineSnap(4, job("a", 0, 4, dl(55*time.Second, 1000, 10)))
	s.Jobs[0].Deadline.Share = 4
	s.Jobs[0].Current = 4
	s.Jobs[0].Throughput = map[int]float64{1: 20, 4: 80}
	bare := s
	bare.Jobs = []JobState{s.Jobs[0]}
	d := *s.Jobs[0].Deadline
	d.Share = 0
	bare.Jobs[0].Deadline = &d
	if a, _ := PlanDeadlines(bare, t0).Target("a"); a.Share != 1 {
		t.Fatalf("without a floor a is planned at %d, want 1 (the test needs the least share inside the margin)", a.Share)
	}
	r, ok := Replan(s, []string{"a"}, t0)
	if !ok {
		t.Fatal("Replan kept a's floor of 4")
	}
	a, _ := PlanDeadlines(r, t0).Target("a")
	if a.Share != 2 || a.Finish.After(t0.Add(55*time.Second-DeadlineMargin(t0.Add(55*time.Second), t0))) {
		t.Errorf("re-planned a: %+v, want 2 workers, done at least the margin early", a)
	}
	// Due in 12 s at 25/s per worker: only its 4 workers finish in time,
	// 2 s early, inside the margin: a keeps its share.
	s.Jobs[0].Throughput = map[int]float64{1: 25, 4: 100}
	s.Jobs[0].Deadline.At = t0.Add(12 * time.Second)
	if r, ok := Replan(s, []string{"a"}, t0); ok {
		a, _ := PlanDeadlines(r, t0).Target("a")
		t.Errorf("Replan shrank a to %+v with no share finishing the margin early", a)
	}
}
