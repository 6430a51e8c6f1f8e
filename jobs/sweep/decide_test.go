package sweep

import (
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestJudge(t *testing.T) {
	sc := Scheduler{Kind: "asha", Grace: 10, Max: 160, ReductionFactor: 4} // rungs 10, 40, 160
	minM, maxM := Metric{Name: "loss", Mode: Min}, Metric{Name: "acc", Mode: Max}
	cases := []struct {
		name     string
		m        Metric
		rung     int
		recorded []float64
		value    float64
		want     Verdict
	}{
		{"first at a rung goes on", minM, 0, nil, 9, Promote},
		{"worse than the only one", minM, 0, []float64{1}, 2, Cut},
		{"better than the only one", minM, 0, []float64{1}, 0.5, Promote},
		{"equal to the cutoff goes on", minM, 0, []float64{1}, 1, Promote},
		{"min: top quarter of 5 goes on", minM, 1, []float64{1, 2, 3, 4, 5}, 1.9, Promote}, // cutoff 2
		{"min: below the top quarter is cut", minM, 1, []float64{1, 2, 3, 4, 5}, 2.1, Cut},
		{"max: top quarter goes on", maxM, 0, []float64{1, 2, 3, 4, 5}, 4.1, Promote}, // cutoff 4
		{"max: below is cut", maxM, 0, []float64{1, 2, 3, 4, 5}, 3.9, Cut},
		{"last rung completes", minM, 2, []float64{0.1}, 9, Complete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Judge(sc, c.m, c.rung, c.recorded, c.value); got != c.want {
				t.Fatalf("want %s, got %s", c.want, got)
			}
		})
	}
	if ms := sc.Milestones(); len(ms) != 3 || ms[0] != 10 || ms[1] != 40 || ms[2] != 160 {
		t.Fatalf("milestones %v", ms)
	}
	if ms := (Scheduler{Grace: 10, Max: 100, ReductionFactor: 3}).Milestones(); len(ms) != 4 || ms[2] != 90 || ms[3] != 100 {
		t.Fatalf("milestones %v", ms)
	}
}

func TestRungValue(t *testing.T) {
	pts := []Point{{Step: 1, Value: 5}, {Step: 2, Value: 4}, {Step: 3, Value: 3}, {Step: 4, Value: 2}, {Step: 6, Value: 1}}
	cases := []struct {
		name      string
		m, w      int64
		want      float64
		wantReady bool
	}{
		{"not reached", 7, 2, 0, false},
		{"mean over the window", 4, 2, 2.5, true},
		{"window of one", 3, 1, 3, true},
		{"nothing in the window: the next", 5, 1, 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ok := RungValue(pts, c.m, c.w)
			if ok != c.wantReady || v != c.want {
				t.Fatalf("want %v %v, got %v %v", c.want, c.wantReady, v, ok)
			}
		})
	}
}

func TestAllot(t *testing.T) {
	cases := []struct {
		name         string
		budget, held int
		slots        []Slot
		want         map[int]int
	}{
		{"new trials get their minimum", 8, 0,
			[]Slot{{Index: 0, Min: 2, Max: 8}, {Index: 1, Min: 2, Max: 8}}, map[int]int{0: 2, 1: 2}},
		{"freed workers go to the best placed trial first", 8, 0,
			[]Slot{{Index: 3, Min: 2, Max: 4, Pinned: 2, Placed: true}, {Index: 1, Min: 2, Max: 8, Pinned: 2, Placed: true}},
			map[int]int{3: 4, 1: 4}},
		{"workers still held by a cut trial wait", 8, 2,
			[]Slot{{Index: 0, Min: 2, Max: 8, Pinned: 2, Placed: true}, {Index: 1, Min: 2, Max: 8, Pinned: 2, Placed: true}},
			map[int]int{0: 4, 1: 2}},
		{"a trial waiting to be placed does not grow", 8, 0,
			[]Slot{{Index: 0, Min: 2, Max: 8, Pinned: 2}, {Index: 1, Min: 2, Max: 8, Pinned: 2, Placed: true}},
			map[int]int{0: 2, 1: 4}},
		{"a trial at most doubles per round", 16, 0,
			[]Slot{{Index: 0, Min: 1, Max: 16, Pinned: 1, Placed: true}}, map[int]int{0: 2}},
		{"nobody shrinks over budget", 4, 2,
			[]Slot{{Index: 0, Min: 2, Max: 8, Pinned: 4, Placed: true}}, map[int]int{0: 4}},
		{"static trials leave the rest to the cluster", 8, 0,
			[]Slot{{Index: 0, Min: 2, Max: 2, Pinned: 2, Placed: true}}, map[int]int{0: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Allot(c.budget, c.held, c.slots)
			if mustJSON(t, got) != mustJSON(t, c.want) {
				t.Fatalf("want %v, got %v", c.want, got)
			}
		})
	}
}

// run is a trial's job as an observation: n workers, losses at steps 1..
func run(n int, losses ...float64) Observation {
	o := Observation{JobState: jobs.Running, Current: n, Min: 2, Max: 8, Throughput: map[int]float64{n: 100 * float64(n)}}
	for i, l := range losses {
		o.Points = append(o.Points, Point{Step: int64(i + 1), Value: l})
	}
	return o
}

func steps(upTo int64, v float64) []float64 {
	out := make([]float64, upTo)
	for i := range out {
		out[i] = v
	}
	return out
}

func smallSweep() Sweep {
	s := builtinSpec()
	s.NumTrials, s.MaxConcurrent = 3, 2
	s.Template.Workers = jobs.WorkerRange{Min: 2, Max: 8}
	s.Scheduler = Scheduler{Kind: "asha", Grace: 2, Max: 8, ReductionFactor: 2} // rungs 2, 4, 8
	return Sweep{ID: "s-1", State: Running, Spec: s, Trials: NewTrials(s)}
}

func TestDecideStartsCutsAndGrows(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := smallSweep()

	// Round 1: two trials start at the template's minimum.
	p := Decide(sw, nil, now)
	if len(p.Start) != 2 || p.Start[0] != 0 || p.Start[1] != 1 || p.Pin[0] != 2 || p.Pin[1] != 2 {
		t.Fatalf("round 1: start %v pin %v", p.Start, p.Pin)
	}
	sw = p.Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"

	// Round 2: both pass rung 0 (step 2); trial 0 first, trial 1 worse: cut.
	obs := map[int]Observation{0: run(2, 1, 1), 1: run(2, 3, 3)}
	p = Decide(sw, obs, now)
	if got := p.Sweep.Trials[1].State; got != TrialCut {
		t.Fatalf("trial 1: want cut, got %s", got)
	}
	if p.Cancel["j-1"] == "" || len(p.Start) != 1 || p.Start[0] != 2 {
		t.Fatalf("round 2: cancel %v start %v", p.Cancel, p.Start)
	}
	if p.Sweep.Best == nil || p.Sweep.Best.Trial != 0 {
		t.Fatalf("best: %+v", p.Sweep.Best)
	}
	if !hasEvent(p, EventCut) || !hasEvent(p, EventPromoted) || !hasEvent(p, EventBestChanged) || !hasEvent(p, EventStarted) {
		t.Fatalf("events: %+v", p.Events)
	}
	sw = p.Sweep
	sw.Trials[2].JobID = "j-2"

	// Round 3: trial 1's job still holds its 2 workers: nothing grows.
	obs[1] = Observation{JobState: jobs.Cancelling, Current: 2, Min: 2, Max: 8}
	obs[2] = Observation{JobState: jobs.Pending, Min: 2, Max: 8}
	p = Decide(sw, obs, now)
	if len(p.Pin) != 0 || len(p.Cancel) != 0 {
		t.Fatalf("round 3: pin %v cancel %v", p.Pin, p.Cancel)
	}
	if again := Decide(p.Sweep, obs, now); again.Changed(p.Sweep) {
		t.Fatalf("deciding twice changed: %+v", again)
	}

	// Round 4: trial 1's job is gone and trial 2 is cut at rung 0 too:
	// their workers go to trial 0, the only survivor, up to the budget.
	obs[1] = Observation{JobState: jobs.Cancelled, Min: 2, Max: 8}
	obs[2] = run(2, 5, 5)
	p = Decide(sw, obs, now)
	if p.Sweep.Trials[2].State != TrialCut {
		t.Fatalf("trial 2: %s", p.Sweep.Trials[2].State)
	}
	sw = p.Sweep
	obs[2] = Observation{JobState: jobs.Cancelled, Min: 2, Max: 8}
	p = Decide(sw, obs, now)
	if p.Pin[0] != 4 || !hasEvent(p, EventGrown) {
		t.Fatalf("round 5: want trial 0 grown to 4 (budget 2x2), got pin %v events %+v", p.Pin, p.Events)
	}
	sw = p.Sweep

	// Trial 0 reaches the last rung: completed, its job stopped, sweep done
	// once its job ended.
	obs[0] = run(4, steps(8, 0.5)...)
	p = Decide(sw, obs, now)
	if p.Sweep.Trials[0].State != TrialCompleted || p.Cancel["j-0"] == "" || p.Sweep.State != Running {
		t.Fatalf("trial 0: %s cancel %v sweep %s", p.Sweep.Trials[0].State, p.Cancel, p.Sweep.State)
	}
	if b := p.Sweep.Best; b.Trial != 0 || b.Rung != 2 || b.Metric != 0.5 {
		t.Fatalf("best: %+v", b)
	}
	obs[0] = Observation{JobState: jobs.Cancelled, Min: 2, Max: 8}
	p = Decide(p.Sweep, obs, now)
	if p.Sweep.State != Succeeded {
		t.Fatalf("sweep: want succeeded, got %s", p.Sweep.State)
	}
}

func TestDecideCancelling(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	sw.State = Cancelling
	obs := map[int]Observation{0: run(2, 1), 1: {JobState: jobs.Succeeded, Min: 2, Max: 8}}
	p := Decide(sw, obs, now)
	if p.Cancel["j-0"] == "" || len(p.Cancel) != 1 || len(p.Start) != 0 {
		t.Fatalf("cancel %v start %v", p.Cancel, p.Start)
	}
	if p.Sweep.Trials[2].State != TrialCancelled || p.Sweep.State != Cancelling {
		t.Fatalf("pending trial %s, sweep %s", p.Sweep.Trials[2].State, p.Sweep.State)
	}
	obs[0] = Observation{JobState: jobs.Cancelled}
	p = Decide(p.Sweep, obs, now)
	if p.Sweep.State != Cancelled || p.Sweep.Trials[0].State != TrialCancelled || p.Sweep.Trials[1].State != TrialCompleted {
		t.Fatalf("sweep %s trials %s %s", p.Sweep.State, p.Sweep.Trials[0].State, p.Sweep.Trials[1].State)
	}
}

func TestDecideFailedJob(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	p := Decide(sw, map[int]Observation{0: {JobState: jobs.Failed}, 1: run(2)}, now)
	if p.Sweep.Trials[0].State != TrialFailed || len(p.Start) != 1 || p.Start[0] != 2 {
		t.Fatalf("trial 0 %s, start %v", p.Sweep.Trials[0].State, p.Start)
	}
}

// A failed trial's event says why its job failed (it said only "its job
// is failed", and the user had to look the job up).
func TestDecideFailedJobSaysWhy(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	why := "program failed 1 time (max_restarts 0); last: worker w0 (rank 0): exit code 3"
	p := Decide(sw, map[int]Observation{0: {JobState: jobs.Failed, JobReason: why}, 1: run(2)}, now)
	for _, e := range p.Events {
		if e.Type == EventEnded && e.Trial != nil && *e.Trial == 0 {
			if !strings.Contains(e.Message, "its job is failed: "+why) || e.Data["job_reason"] != why {
				t.Errorf("event %q %v does not say why the job failed", e.Message, e.Data)
			}
			return
		}
	}
	t.Fatalf("no trial_ended event for trial 0: %+v", p.Events)
}

func hasEvent(p Plan, typ EventType) bool {
	for _, e := range p.Events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func TestDecideWaitsForASucceededJobsLastPoints(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	done := Observation{JobState: jobs.Succeeded, Min: 2, Max: 8, EndedAt: now.Add(-MetricsGrace / 2)}
	done.Points = run(2, steps(6, 1)...).Points
	p := Decide(sw, map[int]Observation{0: done, 1: run(2)}, now)
	if p.Sweep.Trials[0].State != TrialRunning || p.Sweep.Trials[0].Rung != 1 {
		t.Fatalf("within the grace: %s at rung %d", p.Sweep.Trials[0].State, p.Sweep.Trials[0].Rung)
	}
	done.Points = run(2, steps(8, 1)...).Points
	p = Decide(p.Sweep, map[int]Observation{0: done, 1: run(2)}, now)
	if tr := p.Sweep.Trials[0]; tr.State != TrialCompleted || tr.Rung != 2 {
		t.Fatalf("with its last points: %s at rung %d", tr.State, tr.Rung)
	}
	done.Points, done.EndedAt = nil, now.Add(-MetricsGrace)
	sw.Trials[1].State = TrialRunning
	p = Decide(sw, map[int]Observation{0: done, 1: run(2)}, now)
	if p.Sweep.Trials[0].State != TrialCompleted {
		t.Fatalf("after the grace: %s", p.Sweep.Trials[0].State)
	}
}

func TestDecideRecordsAShortJobsFinalValueAtTheLastRung(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	done := Observation{JobState: jobs.Succeeded, Min: 2, Max: 8, EndedAt: now.Add(-MetricsGrace)}
	done.Points = run(2, 1, 1, 1, 1, 1, 0.5, 0.25).Points // ends at step 7 of 8
	p := Decide(sw, map[int]Observation{0: done, 1: run(2)}, now)
	tr := p.Sweep.Trials[0]
	if tr.State != TrialCompleted || tr.Rung != 2 || tr.Results[2].Step != 7 || tr.Results[2].Value != 0.25 {
		t.Fatalf("trial 0: %s rung %d results %+v", tr.State, tr.Rung, tr.Results)
	}
	if len(p.Start) != 1 || p.Start[0] != 2 {
		t.Fatalf("the next trial should start: %v", p.Start)
	}
}

func TestDecideShrinksASuspendedGrownTrialBack(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	sw.Trials[0].Workers = 4
	p := Decide(sw, map[int]Observation{0: {JobState: jobs.Suspended, Min: 2, Max: 8}, 1: run(2)}, now)
	if p.Pin[0] != 2 || !hasEvent(p, EventShrunk) {
		t.Fatalf("pin %v events %+v", p.Pin, p.Events)
	}
}

func TestUsefulMax(t *testing.T) {
	cases := []struct {
		name string
		tput map[int]float64
		max  int
		want int
	}{
		{"nothing measured", nil, 8, 8},
		{"one size", map[int]float64{1: 100}, 8, 8},
		{"scales", map[int]float64{1: 100, 2: 180, 4: 300}, 8, 8},
		{"no faster at 4", map[int]float64{1: 100, 2: 180, 4: 185}, 8, 2},
		{"slower at 2", map[int]float64{1: 100, 2: 90}, 8, 1},
		{"capped by max", map[int]float64{1: 100, 2: 180, 4: 100}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := UsefulMax(c.tput, c.max); got != c.want {
				t.Fatalf("want %d, got %d", c.want, got)
			}
		})
	}
}

func TestDecideShrinksAGrowthThatDidNotPay(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	sw.Trials[0].Workers = 4
	o := run(4)
	o.Throughput = map[int]float64{2: 1000, 4: 900}
	// Growth waits for a measurement at the current size.
	alone := cloneSweep(sw)
	alone.Trials[0].Workers = 2
	alone.Trials[1].State, alone.Trials[2].State = TrialCut, TrialCut
	gone := Observation{JobState: jobs.Cancelled}
	unmeasured := run(2)
	unmeasured.Throughput = nil
	if p := Decide(alone, map[int]Observation{0: unmeasured, 1: gone}, now); len(p.Pin) != 0 {
		t.Fatalf("a trial not measured at its size grew: %v", p.Pin)
	}
	if p := Decide(alone, map[int]Observation{0: run(2), 1: gone}, now); p.Pin[0] != 4 {
		t.Fatalf("measured at its size, it should grow to the budget: %v", p.Pin)
	}
	p := Decide(sw, map[int]Observation{0: o, 1: run(2)}, now)
	if p.Pin[0] != 2 || !hasEvent(p, EventShrunk) {
		t.Fatalf("pin %v events %+v", p.Pin, p.Events)
	}
}

func TestDecideDoesNotRegrowATrialThatDidNotPay(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	sw.Trials[0].Workers = 4
	sw.Trials[1].State, sw.Trials[2].State = TrialCut, TrialCut
	gone := Observation{JobState: jobs.Cancelled}
	slow := run(4)
	slow.Throughput = map[int]float64{2: 1000, 4: 900}
	p := Decide(sw, map[int]Observation{0: slow, 1: gone}, now)
	if p.Pin[0] != 2 || p.Sweep.Trials[0].Cap != 2 {
		t.Fatalf("pin %v cap %d", p.Pin, p.Sweep.Trials[0].Cap)
	}
	// A later measurement says 4 pays after all: the cap holds.
	fast := run(2)
	fast.Throughput = map[int]float64{2: 1000, 4: 1900}
	if again := Decide(p.Sweep, map[int]Observation{0: fast, 1: gone}, now); len(again.Pin) != 0 {
		t.Fatalf("regrown: %v", again.Pin)
	}
}

// A sweep of fewer trials than max_concurrent owns what its trials need
// statically (num_trials x workers.min), not max_concurrent's footprint:
// with 2 trials and max_concurrent 10 at workers 2..8, the survivor grows
// to 4 and no further, even where 8 would pay (it grew into workers no
// static run of the sweep would use).
func TestBudgetOfFewerTrialsThanMaxConcurrent(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := smallSweep()
	sw.Spec.NumTrials, sw.Spec.MaxConcurrent = 2, 10
	sw.Trials = NewTrials(sw.Spec)
	if got := sw.Spec.Budget(); got != 4 {
		t.Fatalf("Budget() = %d, want 4 (2 trials x 2)", got)
	}
	most := 0
	decide := func(obs map[int]Observation) Plan {
		p := Decide(sw, obs, now)
		for _, n := range p.Pin {
			most = max(most, n)
		}
		sw = p.Sweep
		return p
	}
	decide(nil)
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	obs := map[int]Observation{0: run(2, 1, 1), 1: run(2, 3, 3)} // trial 1 cut at rung 0
	decide(obs)
	obs[1] = Observation{JobState: jobs.Cancelled, Min: 2, Max: 8}
	decide(obs)
	// Measured at 4 and faster there than at 2: growing would pay.
	obs[0] = run(4, 1, 1, 1)
	obs[0].Throughput[2] = 200
	decide(obs)
	if most != 4 || sw.Trials[0].Workers != 4 {
		t.Fatalf("survivor: largest pin %d, size %d; want 4 (the budget of 2 trials x 2)", most, sw.Trials[0].Workers)
	}
}
