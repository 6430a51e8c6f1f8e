package planner

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// dl makes j a strict deadline job due in due with work samples left and
// a linear prior of perWorker samples/s per worker.
func dl(due time.Duration, work, perWorker float64) func(*JobState) {
	return func(j *JobState) {
		j.Deadline = &Deadline{At: t0.Add(due), Remaining: work, PriorSamplesPerS: perWorker}
	}
}

func bestEffort() func(*JobState) { return func(j *JobState) { j.Deadline.BestEffort = true } }

// deadlineSnap is a cluster of gpus GPUs (one node) with a linear scaling
// prior (comm ratio 0) and a 1 s resize cost.
func deadlineSnap(gpus int, js ...JobState) Snapshot {
	cfg := DefaultConfig()
	cfg.CommRatio = 0
	cfg.ResizeCost = time.Second
	return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, gpus, a100)}, Jobs: js, Config: cfg}
}

func TestAdmit(t *testing.T) {
	tests := []struct {
		name     string
		gpus     int
		admitted []JobState
		cand     JobState
		want     bool
		atRisk   bool
		workers  int
		why      string // part of the reason when refused or at risk
		never    bool   // refused whatever the deadline (no earliest feasible)
	}{
		{name: "least share that meets the deadline", gpus: 8,
			cand: job("a", 0, 8, dl(30*time.Second, 1000, 10)), want: true, workers: 4},
		{name: "a looser deadline needs fewer", gpus: 8,
			cand: job("a", 0, 8, dl(200*time.Second, 1000, 10)), want: true, workers: 1},
		{name: "too big for the cluster", gpus: 4,
			cand: job("a", 0, 8, dl(20*time.Second, 1000, 10)), want: false, why: "after its deadline"},
		{name: "capped by workers.max", gpus: 8,
			cand: job("a", 0, 2, dl(30*time.Second, 1000, 10)), want: false, why: "even at 2 workers"},
		{name: "unknown speed", gpus: 8,
			cand: job("a", 0, 8, dl(30*time.Second, 1000, 0)), want: false, why: "speed is unknown: no throughput measured and no per_worker_speed", never: true},
		// A job no worker of which fits is told so, not that its speed
		// (which it gave) is unknown.
		{name: "a GPU job on a cluster without GPUs", gpus: 0,
			cand: job("a", 0, 8, dl(30*time.Second, 1000, 10)), want: false, why: "no worker of it fits: the cluster has 0 GPUs, a worker needs 1", never: true},
		{name: "a worker wider than the cluster", gpus: 2,
			cand: job("a", 0, 8, dl(30*time.Second, 1000, 10), gpw(4)), want: false, why: "the cluster has 2 GPUs, a worker needs 4", never: true},
		{name: "a deadline already past", gpus: 8,
			cand: job("a", 0, 8, dl(-time.Minute, 1000, 10)), want: false, why: "its deadline passed 60 s ago"},
		{name: "fits beside an admitted job", gpus: 8,
			admitted: []JobState{job("a", 0, 8, dl(30*time.Second, 1000, 10))},
			cand:     job("b", 0, 8, dl(30*time.Second, 1000, 10)), want: true, workers: 4},
		{name: "would break an admitted job", gpus: 8,
			admitted: []JobState{job("a", 0, 4, dl(30*time.Second, 1000, 10), func(j *JobState) { j.Deadline.Share = 4 })},
			cand:     job("b", 0, 8, dl(20*time.Second, 1000, 10)), want: false, why: "job a miss its deadline"},
		{name: "best effort is admitted at risk", gpus: 4,
			cand: job("a", 0, 8, dl(20*time.Second, 1000, 10), bestEffort()), want: true, atRisk: true, workers: 4, why: "after its deadline"},
		{name: "later deadline waits for the GPUs", gpus: 4,
			admitted: []JobState{job("a", 0, 4, dl(30*time.Second, 1000, 10), func(j *JobState) { j.Deadline.Share = 4 })},
			cand:     job("b", 0, 4, dl(80*time.Second, 1000, 10)), want: true, workers: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := deadlineSnap(tt.gpus, tt.admitted...)
			a := Admit(s, tt.cand, t0)
			if a.Admitted != tt.want || a.AtRisk != tt.atRisk {
				t.Fatalf("admitted %v at risk %v (%s), want %v, %v", a.Admitted, a.AtRisk, a.Reason, tt.want, tt.atRisk)
			}
			if tt.want && a.Workers != tt.workers {
				t.Errorf("workers %d, want %d", a.Workers, tt.workers)
			}
			if tt.why != "" && !strings.Contains(a.Reason, tt.why) {
				t.Errorf("reason %q, want it to say %q", a.Reason, tt.why)
			}
			if tt.want && !tt.atRisk && (a.ExpectedFinish.IsZero() || a.ExpectedFinish.After(tt.cand.Deadline.At)) {
				t.Errorf("expected finish %v, deadline %v", a.ExpectedFinish, tt.cand.Deadline.At)
			}
			if tt.never && !a.EarliestFeasible.IsZero() {
				t.Errorf("earliest feasible %v for a job no deadline admits", a.EarliestFeasible)
			}
			if !tt.want && !tt.never {
				ef := a.EarliestFeasible
				if ef.IsZero() || !ef.After(tt.cand.Deadline.At) {
					t.Fatalf("earliest feasible %v, want after %v", ef, tt.cand.Deadline.At)
				}
				c := tt.cand
				d := *c.Deadline
				d.At = ef
				c.Deadline = &d
				if again := Admit(s, c, t0); !again.Admitted {
					t.Errorf("resubmitted with its earliest feasible deadline %v: refused: %s", ef, again.Reason)
				}
				d.At = ef.Add(-2 * time.Second)
				if early := Admit(s, c, t0); early.Admitted {
					t.Errorf("2 s before its earliest feasible deadline it is admitted")
				}
			}
			// AdmitVerdict is the same answer without the bisection.
			a.EarliestFeasible = time.Time{}
			if v := AdmitVerdict(s, tt.cand, t0); v != a {
				t.Errorf("AdmitVerdict %+v, want Admit's %+v without EarliestFeasible", v, a)
			}
		})
	}
}

func TestAdmitEarliestFeasibleOfTooBig(t *testing.T) {
	// 4 GPUs, 1000 samples at 10/s per worker: 25 s + 1 s resize cost at best.
	s := deadlineSnap(4)
	a := Admit(s, job("a", 0, 8, dl(10*time.Second, 1000, 10)), t0)
	if a.Admitted {
		t.Fatal("admitted")
	}
	if got, want := a.EarliestFeasible.Sub(t0), 26*time.Second; got != want {
		t.Errorf("earliest feasible in %s, want %s", got, want)
	}
}

func TestPlanDeadlinesEDFOrderAndFloor(t *testing.T) {
	// Two jobs of 1000 samples on 4 GPUs at 10/s per worker: a is due
	// first and takes what it needs first; b runs beside it and speeds
	// up when a is done.
	s := deadlineSnap(4,
		job("b", 0, 4, dl(100*time.Second, 1000, 10)),
		job("a", 0, 4, dl(40*time.Second, 1000, 10)))
	p := PlanDeadlines(s, t0)
	a, _ := p.Target("a")
	b, _ := p.Target("b")
	if a.Share != 3 || a.Now != 3 || !a.Feasible {
		t.Errorf("a: %+v, want share 3 now", a)
	}
	if b.Now != 1 || !b.Feasible || b.Share < 1 {
		t.Errorf("b: %+v, want 1 worker now and in time", b)
	}
	// A floor keeps a's share even though 3 would do.
	s.Jobs[1].Deadline.Share = 4
	p = PlanDeadlines(s, t0)
	if a, _ := p.Target("a"); a.Share != 4 {
		t.Errorf("with share 4 planned last round a gets %d", a.Share)
	}
}

func TestPlanDeadlinesSizes(t *testing.T) {
	// Only power-of-two sizes, and 8 is no faster than 4: it is not used.
	j := job("a", 0, 8, dl(31*time.Second, 1000, 0), func(j *JobState) {
		j.Deadline.Sizes = []int{1, 2, 4, 8}
		j.Throughput = map[int]float64{1: 10, 2: 20, 4: 34, 8: 34}
	})
	s := deadlineSnap(8, j)
	tg, _ := PlanDeadlines(s, t0).Target("a")
	if tg.Share != 4 || !tg.Feasible {
		t.Errorf("%+v, want share 4 in time", tg)
	}
	s.Jobs[0].Deadline.At = t0.Add(20 * time.Second)
	if tg, _ := PlanDeadlines(s, t0).Target("a"); tg.Feasible || tg.Share != 4 {
		t.Errorf("%+v, want not feasible at its largest useful size 4", tg)
	}
}

func TestThroughputAt(t *testing.T) {
	m := map[int]float64{2: 20, 8: 56}
	tests := []struct {
		n    int
		want float64
	}{{2, 20}, {8, 56}, {5, 38}}
	for _, tt := range tests {
		if got := throughputAt(m, 0, 0.05, tt.n); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("T(%d) = %g, want %g", tt.n, got, tt.want)
		}
	}
	if got := throughputAt(nil, 10, 0, 4); math.Abs(got-40) > 1e-9 {
		t.Errorf("prior T(4) = %g, want 40", got)
	}
	if got := throughputAt(nil, 0, 0, 4); got != 0 {
		t.Errorf("nothing known: T(4) = %g, want 0", got)
	}
	// Beyond the measured sizes the fitted model passes through the last one.
	if got := throughputAt(m, 0, 0.05, 16); !(got > 56 && got < 56*2) {
		t.Errorf("T(16) = %g, want between 56 and 112", got)
	}
}

// randomDeadlineJob draws a strict deadline job arriving at now.
func randomDeadlineJob(r *rand.Rand, id string, now time.Time) JobState {
	per := 5 + 20*r.Float64()
	work := per * (20 + 400*r.Float64())
	j := job(id, 0, 1+r.IntN(8))
	j.Deadline = &Deadline{At: now.Add(time.Duration((10 + 300*r.Float64()) * float64(time.Second))), Remaining: work, PriorSamplesPerS: per}
	return j
}

// TestAdmittedJobsMeetDeadlines admits random jobs as they arrive and runs
// the cluster as the plans say (each round the jobs run at Now, resizes
// stall them the resize cost); every admitted job must finish in time, and
// every plan of the admitted set must be feasible.
func TestAdmittedJobsMeetDeadlines(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 7))
		s := deadlineSnap(4 + r.IntN(12))
		now := t0
		type run struct {
			stall  float64
			due    time.Time
			finish time.Time
		}
		runs := map[string]*run{}
		arrivals := 0
		nextArrival := now
		for step := 0; step < 10000 && (arrivals < 25 || len(s.Jobs) > 0); step++ {
			if arrivals < 25 && !now.Before(nextArrival) {
				c := randomDeadlineJob(r, "j"+string(rune('A'+arrivals)), now)
				arrivals++
				if a := Admit(s, c, now); a.Admitted {
					c.Deadline.Share = a.Workers
					s.Jobs = append(s.Jobs, c)
					runs[c.ID] = &run{due: c.Deadline.At}
				}
				nextArrival = now.Add(time.Duration(r.ExpFloat64() * 20 * float64(time.Second)))
			}
			p := PlanDeadlines(s, now)
			for i, tg := range p.Targets {
				if !tg.Feasible {
					t.Fatalf("seed %d at %s: admitted job %s has no feasible plan: %s (finish %s due %s, %+v)", seed, now.Sub(t0), tg.JobID, tg.Reason, tg.Finish.Sub(t0), s.Jobs[i].Deadline.At.Sub(t0), s.Jobs[i])
				}
				j := &s.Jobs[i]
				if tg.Now != j.Current {
					runs[j.ID].stall = s.Config.ResizeCost.Seconds()
					if tg.Now == 0 {
						runs[j.ID].stall = 0
					}
					j.LastResize = now
				}
				j.Current, j.Deadline.Share = tg.Now, tg.Share
			}
			// Run to the next finish or arrival (at most 1 s, so that a
			// job that waits starts when the GPUs are free).
			dt := 1.0
			if arrivals < 25 {
				dt = min(dt, max(nextArrival.Sub(now).Seconds(), 0.001))
			}
			for _, j := range s.Jobs {
				if j.Current > 0 {
					rate := float64(j.Current) * j.Deadline.PriorSamplesPerS
					dt = min(dt, runs[j.ID].stall+j.Deadline.Remaining/rate)
				}
			}
			dt = max(dt, 1e-6)
			now = now.Add(time.Duration(dt * float64(time.Second)))
			kept := s.Jobs[:0]
			for _, j := range s.Jobs {
				ru := runs[j.ID]
				if j.Current > 0 {
					run := dt
					if ru.stall > 0 {
						st := min(ru.stall, run)
						ru.stall -= st
						run -= st
					}
					j.Deadline.Remaining -= run * float64(j.Current) * j.Deadline.PriorSamplesPerS
				}
				if j.Deadline.Remaining <= 1e-6 {
					ru.finish = now
					continue
				}
				kept = append(kept, j)
			}
			s.Jobs = kept
		}
		if len(runs) == 0 {
			t.Fatalf("seed %d: nothing admitted", seed)
		}
		for id, ru := range runs {
			if ru.finish.IsZero() || ru.finish.After(ru.due.Add(time.Millisecond)) {
				t.Errorf("seed %d: job %s finished %s, due %s", seed, id, ru.finish.Sub(t0), ru.due.Sub(t0))
			}
		}
	}
}

// TestRefusalIsMonotone: a job whose deadline is later than every admitted
// one (so that it is planned after them) and that is refused is refused
// with any earlier such deadline and with more work; one admitted is
// admitted with a later deadline or less work. Between two admitted
// deadlines the answer depends on the earliest-deadline-first order, which
// a deadline crossing another job's changes (the greedy plan is not exact).
func TestRefusalIsMonotone(t *testing.T) {
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 11))
		s := deadlineSnap(2 + r.IntN(10))
		last := t0
		for i := range 4 {
			c := randomDeadlineJob(r, "a"+string(rune('0'+i)), t0)
			if a := Admit(s, c, t0); a.Admitted {
				c.Deadline.Share = a.Workers
				s.Jobs = append(s.Jobs, c)
				if c.Deadline.At.After(last) {
					last = c.Deadline.At
				}
			}
		}
		c := randomDeadlineJob(r, "cand", t0)
		c.Deadline.At = last.Add(c.Deadline.At.Sub(t0))
		base := Admit(s, c, t0)
		if !base.Admitted && !base.EarliestFeasible.IsZero() {
			c2 := c
			d := *c.Deadline
			d.At = base.EarliestFeasible
			c2.Deadline = &d
			if !Admit(s, c2, t0).Admitted {
				t.Errorf("seed %d: refused at its earliest feasible deadline", seed)
			}
		}
		for _, f := range []float64{0.5, 0.8, 1.25, 2} {
			d := *c.Deadline
			d.At = last.Add(time.Duration(float64(d.At.Sub(last)) * f))
			c2 := c
			c2.Deadline = &d
			got := Admit(s, c2, t0).Admitted
			if base.Admitted && f > 1 && !got {
				t.Errorf("seed %d: admitted with deadline x1, refused with x%g", seed, f)
			}
			if !base.Admitted && f < 1 && got {
				t.Errorf("seed %d: refused with deadline x1, admitted with x%g", seed, f)
			}
			d = *c.Deadline
			d.Remaining *= f
			got = Admit(s, c2, t0).Admitted
			if base.Admitted && f < 1 && !got {
				t.Errorf("seed %d: admitted, refused with x%g the work", seed, f)
			}
			if !base.Admitted && f > 1 && got {
				t.Errorf("seed %d: refused, admitted with x%g the work", seed, f)
			}
		}
	}
}

// A refused deadline centuries away (a deadline in the year 9999 of a job
// whose speed is unknown) ends the search for an earliest feasible one:
// its span once overflowed time.Duration when doubled, and the bisection
// looped for ever, a request's goroutine burning a core.
func TestEarliestFeasibleOfAFarDeadlineEnds(t *testing.T) {
	never := func(time.Time) bool { return false }
	for _, far := range []time.Duration{200 * 365 * 24 * time.Hour, time.Duration(math.MaxInt64)} {
		done := make(chan time.Time, 1)
		go func() { done <- earliestFeasible(t0, t0.Add(far), never) }()
		select {
		case got := <-done:
			if !got.IsZero() {
				t.Errorf("refused %s away: earliest feasible %v, want none (zero)", far, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("refused %s away: earliestFeasible did not return in 5 s", far)
		}
	}
	// Through Admit, as POST /v1/jobs asks: a deadline in the year 9999.
	s := deadlineSnap(4)
	cand := job("a", 0, 4, dl(0, 1000, 0))
	cand.Deadline.At = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	done := make(chan Admission, 1)
	go func() { done <- Admit(s, cand, t0) }()
	select {
	case a := <-done:
		if a.Admitted || !a.EarliestFeasible.IsZero() {
			t.Errorf("admission %+v, want refused (unknown speed) with no earliest feasible", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Admit of a deadline in the year 9999 did not return in 5 s")
	}
}

// A best-effort deadline job whose speed is unknown (no per_worker_speed,
// nothing measured) runs at workers.min in what the other deadline jobs
// leave, so that its throughput is measured: it was admitted and then
// never placed, pending for ever on an idle cluster.
func TestBestEffortJobOfUnknownSpeedRunsToBeMeasured(t *testing.T) {
	unknown := job("u", 2, 8, dl(time.Hour, 1000, 0), bestEffort())
	p := Decide(deadlineSnap(4, unknown), t0)
	if got := p.Targets[0].Workers; got != 2 {
		t.Fatalf("idle cluster: %d workers (%s), want 2 (workers.min)", got, p.Targets[0].Reason)
	}
	if tg := p.Targets[0].Deadline; tg == nil || tg.Feasible || !strings.Contains(tg.Reason, "until its throughput is measured") {
		t.Errorf("target %+v: want not feasible, saying it runs until measured", tg)
	}
	// A strict job that needs the whole cluster comes first: nothing is
	// left, and the reason says so.
	strict := job("s", 4, 4, dl(30*time.Second, 1200, 10))
	p = Decide(deadlineSnap(4, strict, unknown), t0)
	if p.Targets[0].Workers != 4 || p.Targets[1].Workers != 0 {
		t.Fatalf("workers %d and %d, want 4 for the strict job and 0 for the unknown one", p.Targets[0].Workers, p.Targets[1].Workers)
	}
	if r := p.Targets[1].Reason; !strings.Contains(r, "no GPUs are left for it to run and be measured") {
		t.Errorf("reason %q: want it to say no GPUs are left", r)
	}
	// A strict job of unknown speed is still planned at nothing (Admit
	// refuses it; one in the snapshot is not guessed at).
	p = Decide(deadlineSnap(4, job("x", 2, 8, dl(time.Hour, 1000, 0))), t0)
	if p.Targets[0].Workers != 0 {
		t.Errorf("strict job of unknown speed: %d workers, want 0", p.Targets[0].Workers)
	}
}
