package dlsim

import (
	"context"
	"fmt"
	"math"
	"time"
)

// epoch is the time of the trace's second 0 (any fixed time does).
var epoch = time.Date(2023, 3, 25, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }

const eps = 1e-6

// run is one job during a run.
type run struct {
	j          Job
	done       float64 // iterations
	workers    int
	placement  map[string]int
	stall      float64
	started    bool
	finish     float64 // -1 while it runs
	refused    bool
	admitted   bool // by the deadline policy, strict
	lastResize float64
	share      int
	attained   float64 // GPU seconds
	measured   map[int]float64
}

func (r *run) rate() float64 { return r.j.Rate(r.workers) }

// timeToFinish is the seconds it needs at its current size.
func (r *run) timeToFinish() float64 {
	if r.workers == 0 {
		return math.Inf(1)
	}
	return r.stall + (r.j.Work-r.done)/r.rate()
}

func (r *run) advance(dt float64) {
	if r.workers == 0 || dt <= 0 {
		return
	}
	r.attained += float64(r.workers) * dt
	if s := min(r.stall, dt); s > 0 {
		r.stall -= s
		dt -= s
	}
	if dt > 0 {
		r.done = min(r.done+dt*r.rate(), r.j.Work)
		if _, ok := r.measured[r.workers]; !ok {
			r.measured[r.workers] = r.rate()
		}
	}
}

type engine struct {
	o      Options
	costs  ResizeCosts
	all    []*run
	next   int
	active []*run
	now    float64
	p      policy
	busy   float64
	res    Result
	// phase is where the trace's clock stands in a slot at the first
	// arrival (time 0 here): slots fall at multiples of the slot on the
	// trace's own clock, as ElasticFlow's simulator decides.
	phase float64
}

// policy decides every round: a worker count (and, for planner.Decide, a
// placement) per active job.
type policy interface {
	// arrive is told of each new job, in submission order; false refuses it.
	arrive(e *engine, r *run) bool
	decide(e *engine) []target
}

type target struct {
	workers   int
	placement map[string]int
}

// maxSpan is the most seconds a job's arrival or deadline may lie after
// the first arrival: 31 years, where float64 seconds still resolve eps and
// time.Duration holds the run.
const maxSpan = 1e9

// Run replays the jobs under the options.
func Run(ctx context.Context, js []Job, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("simulate: %w", err)
	}
	start := time.Now()
	e := &engine{o: o, costs: o.costs(), res: Result{Policy: string(o.Policy), Jobs: len(js), GPUs: o.GPUs}}
	// Times count from the first arrival (traces give seconds on their
	// own clock), and stay where time.Duration and float64 are exact.
	first := math.Inf(1)
	for _, j := range js {
		first = min(first, j.Submit)
	}
	for _, j := range js {
		if j.GPUs > o.GPUs {
			return Result{}, fmt.Errorf("simulate: job %s asks for %d GPUs, the cluster has %d", j.ID, j.GPUs, o.GPUs)
		}
		j.Submit, j.Deadline = j.Submit-first, j.Deadline-first
		if !(j.Submit <= maxSpan) || !(j.Deadline <= maxSpan) {
			return Result{}, fmt.Errorf("simulate: job %s arrives %g s after the first, deadline %g s after it: the simulator's clock spans %g s (31 years)", j.ID, j.Submit, j.Deadline, float64(maxSpan))
		}
		e.all = append(e.all, &run{j: j, finish: -1, measured: map[int]float64{}})
	}
	if s := o.Slot.Seconds(); s > 0 && len(js) > 0 {
		// The first decision too is at a slot: the first arrival waits
		// for it like every other.
		e.phase = math.Mod(first, s)
		if e.phase > eps {
			e.now = s - e.phase
		}
	}
	e.p = newPolicy(o)
	for e.next < len(e.all) || len(e.active) > 0 {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("simulate: stopped at %.0f s: %w", e.now, err)
		}
		for e.next < len(e.all) && e.all[e.next].j.Submit <= e.now+eps {
			if err := ctx.Err(); err != nil { // a burst's admissions take a while
				return Result{}, fmt.Errorf("simulate: stopped at %.0f s: %w", e.now, err)
			}
			r := e.all[e.next]
			e.next++
			if e.p.arrive(e, r) {
				e.active = append(e.active, r)
			} else {
				r.refused = true
			}
		}
		if e.next == len(e.all) && len(e.active) == 0 {
			break // the last arrivals were refused: nothing is left to run
		}
		e.apply(e.p.decide(e))
		t := e.nextRound()
		if math.IsInf(t, 1) {
			return Result{}, fmt.Errorf("simulate: stuck at %.0f s with %d jobs waiting and none running", e.now, len(e.active))
		}
		e.advance(t)
	}
	e.result()
	e.res.WallS = time.Since(start).Seconds()
	return e.res, nil
}

func (e *engine) apply(ts []target) {
	c := e.costs
	for i, t := range ts {
		r := e.active[i]
		if t.workers == r.workers {
			r.placement = t.placement
			continue
		}
		cost := 0.0
		switch {
		case r.workers == 0:
			cost = c.Start.Seconds()
			r.started = true
		case t.workers > r.workers:
			cost = c.Join.Seconds()
		case t.workers > 0:
			cost = c.Leave.Seconds()
		}
		if r.workers > 0 || t.workers > 0 {
			e.res.Resizes++
		}
		r.stall = cost
		r.workers, r.placement, r.lastResize = t.workers, t.placement, e.now
	}
}

// nextRound is when the policy decides next: the next arrival or
// completion, rounded up to the slot (a multiple of it on the trace's
// clock).
func (e *engine) nextRound() float64 {
	t := math.Inf(1)
	if e.next < len(e.all) {
		t = e.all[e.next].j.Submit
	}
	for _, r := range e.active {
		t = min(t, e.now+r.timeToFinish())
	}
	if s := e.o.Slot.Seconds(); s > 0 && !math.IsInf(t, 1) {
		t = math.Ceil((t+e.phase-eps)/s)*s - e.phase
		if t <= e.now+eps {
			t = e.now + s
		}
	}
	return t
}

// advance moves time to t, finishing the jobs that complete on the way.
func (e *engine) advance(t float64) {
	for e.now < t-eps {
		step := t - e.now
		for _, r := range e.active {
			step = min(step, r.timeToFinish())
		}
		kept := e.active[:0]
		for _, r := range e.active {
			if r.workers > 0 && r.timeToFinish() <= step+eps {
				e.busy += float64(r.workers) * r.timeToFinish()
				r.finish = e.now + r.timeToFinish()
				r.done, r.workers, r.placement = r.j.Work, 0, nil
				continue
			}
			e.busy += float64(r.workers) * step
			r.advance(step)
			kept = append(kept, r)
		}
		clear(e.active[len(kept):])
		e.active = kept
		e.now += step
	}
	e.now = t
}

func (e *engine) result() {
	var last float64
	for _, r := range e.all {
		switch {
		case r.refused:
			e.res.Refused++
		case r.finish <= r.j.Deadline+eps:
			e.res.Met++
		default:
			e.res.Late++
			if r.admitted {
				e.res.AdmittedLate++
			}
		}
		last = max(last, r.finish)
	}
	e.res.MakespanS = last
	if len(e.all) > 0 {
		e.res.DeadlineMetRatio = float64(e.res.Met) / float64(len(e.all))
	}
	if last > 0 {
		// The GPU seconds summed step by step may pass the cluster's by
		// rounding (1.000000000000003 on a cluster kept full): a share.
		e.res.Utilisation = min(e.busy/(last*float64(e.o.GPUs)), 1)
	}
}
