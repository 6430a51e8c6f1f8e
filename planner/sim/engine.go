package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/planner"
)

// epoch is the wall-clock time of the trace's second 0 (any fixed time
// does: Decide only compares times).
var epoch = time.Date(2017, 9, 21, 0, 0, 0, 0, time.UTC)

// baseSamplesPerS scales every job's modelled throughput; only ratios
// matter to the policy, but measurements look like real ones.
const baseSamplesPerS = 1000

// job is one trace job during a run.
type job struct {
	t        TraceJob
	lo, hi   int
	model    planner.ScalingModel // the job's true speed, unknown to Decide
	rateAtRq float64              // model throughput at the requested size

	done       float64 // work done, in seconds at the requested size
	ckptDone   float64 // work done at the last checkpoint
	sinceCkpt  float64 // seconds run since the last checkpoint
	workers    int
	placement  map[string]int
	stall      float64 // seconds of resize stall left
	attained   float64 // GPU seconds
	lastResize time.Time
	measured   map[int]float64
	started    bool
	start      float64
	finish     float64
	resizes    int
	failures   int     // failures so far (to draw the next one)
	nextFail   float64 // attained GPU seconds at which a worker next dies

	// A sweep's trial (trials.go): pinned is the size its sweep pinned it
	// to (0: none), cancelled that its sweep cut it, maxWorkers the
	// largest size it ran at.
	pinned     int
	cancelled  bool
	maxWorkers int
}

// newJob is trace job t with its true scaling model and first failure
// drawn (its bounds are the caller's).
func newJob(t TraceJob, o Options) *job {
	j := &job{t: t, measured: map[int]float64{}}
	k := commRatio(t.ID)
	a := 1.0 / baseSamplesPerS
	j.model = planner.ScalingModel{Alpha: a, Beta: k * a}
	j.rateAtRq = j.model.Throughput(t.GPUs)
	j.drawFailure(o.meanGPUSecondsBetweenFailures())
	return j
}

// drawFailure sets the attained service at which the job's next worker
// failure happens: exponential with the given mean GPU seconds, drawn from
// the job's ID and failure count.
func (j *job) drawFailure(meanGPUSeconds float64) {
	if meanGPUSeconds <= 0 {
		j.nextFail = math.Inf(1)
		return
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s#fail%d", j.t.ID, j.failures)
	u := (float64(h.Sum64()>>11) + 0.5) / float64(1<<53)
	j.nextFail = j.attained - math.Log(u)*meanGPUSeconds
}

// commRatio draws a job's communication-to-compute ratio from its ID,
// log-uniform in [0.005, 0.05]: from nearly linear scaling to a job that
// gains little past a dozen workers.
func commRatio(id string) float64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	u := float64(h.Sum64()>>11) / float64(1<<53)
	return 0.005 * math.Pow(10, u)
}

// rate is the job's progress per second (work units: seconds at the
// requested size) with n workers.
func (j *job) rate(n int) float64 {
	if n <= 0 {
		return 0
	}
	return j.model.Throughput(n) / j.rateAtRq
}

// timeToFinish is how long the job needs at its current size.
func (j *job) timeToFinish() float64 {
	if j.workers == 0 {
		return math.Inf(1)
	}
	return j.stall + (j.t.Duration-j.done)/j.rate(j.workers)
}

// advance runs the job for dt seconds at its current size.
func (j *job) advance(dt, period float64) {
	if j.workers == 0 || dt <= 0 {
		return
	}
	j.attained += float64(j.workers) * dt
	run := dt
	if j.stall > 0 {
		s := min(j.stall, dt)
		j.stall -= s
		run -= s
	}
	if run > 0 {
		r := j.rate(j.workers)
		j.done = min(j.done+run*r, j.t.Duration)
		if _, ok := j.measured[j.workers]; !ok {
			j.measured[j.workers] = j.model.Throughput(j.workers)
		}
		j.sinceCkpt += run
		if period <= 0 { // no period: every step is saved
			j.checkpoint()
		} else if j.sinceCkpt >= period {
			j.sinceCkpt = math.Mod(j.sinceCkpt, period)
			j.ckptDone = max(j.done-j.sinceCkpt*r, j.ckptDone)
		}
	}
}

// checkpoint records the job's progress as saved (it is suspended, and
// saves before its workers stop).
func (j *job) checkpoint() { j.ckptDone, j.sinceCkpt = j.done, 0 }

// rollback restarts the job from its last checkpoint.
func (j *job) rollback() { j.done, j.sinceCkpt = j.ckptDone, 0 }

// Run replays the trace under the options and returns its figures.
func Run(ctx context.Context, trace []TraceJob, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("simulate: %w", err)
	}
	all := make([]*job, len(trace))
	load := o.load()
	// Times count from the first arrival (a trace may give Unix times),
	// and stay where float64 seconds and time.Duration are exact enough.
	first := firstSubmit(trace, o.Sweeps)
	for i, t := range trace {
		t.Submit = (t.Submit - first) / load
		if t.GPUs > o.GPUs {
			return Result{}, fmt.Errorf("simulate: job %s asks for %d GPUs, the cluster has %d", t.ID, t.GPUs, o.GPUs)
		}
		if err := inSpan(t.ID, t.Submit, t.Duration, load); err != nil {
			return Result{}, err
		}
		j := newJob(t, o)
		j.lo, j.hi = o.bounds(t.GPUs)
		all[i] = j
	}
	e := &engine{o: o, cfg: o.config(), all: all, costs: o.costs(), period: o.CheckpointPeriod.Seconds()}
	for _, a := range o.Sweeps {
		a.Submit = (a.Submit - first) / load
		if err := inSpan("of sweep "+a.ID, a.Submit, 0, load); err != nil {
			return Result{}, err
		}
		e.sweeps = append(e.sweeps, &simSweep{a: a, trials: map[int]*job{}, points: map[int][]sweep.Point{}, byJob: map[string]int{}})
	}
	e.nodes = make([]jobs.Node, (o.GPUs+o.GPUsPerNode-1)/o.GPUsPerNode)
	for i := range e.nodes {
		g := min(o.GPUsPerNode, o.GPUs-i*o.GPUsPerNode)
		e.nodes[i] = jobs.Node{ID: fmt.Sprintf("node-%03d", i), Class: jobs.GPUClass{Model: "sim", MemoryMiB: 32768}, GPUs: g}
	}
	start := time.Now()
	if err := e.run(ctx); err != nil {
		return Result{}, err
	}
	r := e.result()
	r.Sweeps = e.sweepResults()
	r.WallS = time.Since(start).Seconds()
	return r, nil
}

type engine struct {
	o      Options
	cfg    planner.Config
	all    []*job
	nodes  []jobs.Node
	costs  ResizeCosts
	period float64 // checkpoint period, seconds
	now    float64
	next   int    // index of the next arrival in all
	active []*job // arrived, not finished, in arrival order
	sweeps []*simSweep

	// finished is the service (GPU seconds) of the jobs finished so far,
	// sorted; history is its Gittins summary, rebuilt when it grows.
	finished []float64
	history  *planner.ServiceHistory
	histN    int

	busy      float64 // GPU seconds held
	decisions int
	failures  int
	// givebacks counts the rounds in which opportunistic jobs gave GPUs
	// back to guaranteed ones; givebackS sums the seconds from each such
	// decision until the GPUs ran the guaranteed work.
	givebacks int
	givebackS float64
}

const eps = 1e-6

// decideHook, when set (by tests), sees every snapshot the engine hands
// Decide and the plan it gets back.
var decideHook func(planner.Snapshot, planner.Plan)

func (e *engine) run(ctx context.Context) error {
	limit := e.runBound()
	for e.next < len(e.all) || len(e.active) > 0 || e.sweepsLeft() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("simulate: stopped at %.0f s: %w", e.now, err)
		}
		e.arrive()
		if err := e.sweepRounds(); err != nil {
			return err
		}
		if e.next == len(e.all) && len(e.active) == 0 && !e.sweepsLeft() {
			break // the last sweep ended in this round, after every job
		}
		e.decide()
		t := e.nextEvent()
		if math.IsInf(t, 1) {
			return fmt.Errorf("simulate: stuck %.0f s after the first arrival with %d jobs waiting and none running", e.now, len(e.active))
		}
		if t > limit {
			return fmt.Errorf("simulate: gave up %.0f s after the first arrival with %d jobs unfinished (%d running): the next event, at %.0f s, is past the run's bound of %.0f s (the last arrival, plus every job's GPU seconds one after another, plus ten years)",
				e.now, len(e.active), e.running(), t, limit)
		}
		e.advance(t)
	}
	return nil
}

// arrive takes in the jobs submitted by now, and those submitted less
// than eps after it at the latest of their times: the clock moves there
// first, so that no job starts (or finishes) before its submission.
func (e *engine) arrive() {
	k, last := e.next, e.now
	for ; k < len(e.all) && e.all[k].t.Submit <= e.now+eps; k++ {
		last = max(last, e.all[k].t.Submit)
	}
	if last > e.now {
		e.advance(last)
	}
	e.active = append(e.active, e.all[e.next:k]...)
	e.next = k
}

// maxSpan is the most seconds a job may arrive after the first, or run:
// 31 years, where float64 seconds still resolve eps and the run's end
// (maxSimAfterLast later) stays inside time.Duration.
const maxSpan = 1e9

// firstSubmit is the earliest arrival of the trace's jobs and sweeps.
func firstSubmit(trace []TraceJob, sweeps []SweepArrival) float64 {
	first := math.Inf(1)
	for _, t := range trace {
		first = min(first, t.Submit)
	}
	for _, a := range sweeps {
		first = min(first, a.Submit)
	}
	if math.IsInf(first, 1) {
		return 0
	}
	return first
}

// inSpan refuses a job (or sweep) that arrives, at the load, or runs for
// longer than the simulator's clock holds, or a time that is not finite.
func inSpan(id string, submit, duration, load float64) error {
	switch {
	case !(submit >= 0) || submit > maxSpan:
		return fmt.Errorf("simulate: job %s arrives %g s after the first at load %g: the simulator's clock spans %g s (31 years)", id, submit, load, float64(maxSpan))
	case !(duration >= 0) || duration > maxSpan:
		return fmt.Errorf("simulate: job %s runs %g s: the simulator's clock spans %g s (31 years)", id, duration, float64(maxSpan))
	}
	return nil
}

// maxSimAfterLast bounds a run: ten years after the last submission
// and the trace's jobs run one after another (a sweep whose trials can
// never be placed would run its rounds forever).
const maxSimAfterLast = 10 * 365 * 24 * 3600.0

// maxClock is the latest time a run may reach: 285 years, inside
// time.Duration's 292.
const maxClock = 9e9

// runBound is the time past which a run is given up: the last arrival,
// plus the trace's jobs run one after another on one GPU each (a job
// runs no slower at any size than its request's GPU seconds take on one),
// plus maxSimAfterLast (for what a policy adds: restarts, failures, the
// sweeps' trials), at most maxClock.
func (e *engine) runBound() float64 {
	serial := 0.0
	for _, j := range e.all {
		serial += j.t.Duration * float64(j.t.GPUs)
	}
	return min(e.lastSubmit()+serial+maxSimAfterLast, maxClock)
}

// running counts the active jobs that hold workers.
func (e *engine) running() int {
	n := 0
	for _, j := range e.active {
		if j.workers > 0 {
			n++
		}
	}
	return n
}

func (e *engine) lastSubmit() float64 {
	last := 0.0
	if n := len(e.all); n > 0 {
		last = e.all[n-1].t.Submit
	}
	for _, s := range e.sweeps {
		last = max(last, s.a.Submit)
	}
	return last
}

// decide asks the planner and applies its plan at once (a simulated
// cluster places instantly; the resize cost stands for the stall).
func (e *engine) decide() {
	if len(e.active) == 0 {
		return
	}
	now := epoch.Add(time.Duration(e.now * float64(time.Second)))
	s := planner.Snapshot{Config: e.cfg, Jobs: make([]planner.JobState, len(e.active)), Service: e.serviceHistory()}
	free := make(map[string]int, len(e.nodes))
	for _, n := range e.nodes {
		free[n.ID] = n.GPUs
	}
	for i, j := range e.active {
		for id, w := range j.placement {
			free[id] -= w
		}
		s.Jobs[i] = planner.JobState{
			ID: j.t.ID, Tenant: j.t.Tenant, Min: j.lo, Max: j.hi, GPUsPerWorker: 1,
			Priority: j.t.Priority, SubmittedAt: epoch.Add(time.Duration(j.t.Submit * float64(time.Second))),
			AttainedGPUSeconds: j.attained, Current: j.workers, Placement: j.placement,
			Throughput: j.measured, LastResize: j.lastResize, Pinned: j.pinned,
		}
		if e.o.oracle() {
			// The planner ranks by attained service; hand it the work
			// left instead (GPU seconds at the requested size).
			s.Jobs[i].AttainedGPUSeconds = (j.t.Duration - j.done) * float64(j.t.GPUs)
		}
	}
	s.Capacity.Nodes = make([]jobs.Node, len(e.nodes))
	for i, n := range e.nodes {
		n.FreeGPUs = free[n.ID]
		s.Capacity.Nodes[i] = n
	}
	p := planner.Decide(s, now)
	e.decisions++
	if decideHook != nil {
		decideHook(s, p)
	}

	// released is, per node, the seconds until the GPUs a shrinking or
	// suspended job gives back there are free: a job placed on them waits.
	released := map[string]float64{}
	oppReleased := map[string]bool{}
	for i, tg := range p.Targets {
		j := e.active[i]
		if tg.Workers >= j.workers {
			continue
		}
		d := e.costs.Leave.Seconds()
		for id, w := range j.placement {
			if w > tg.Placement[id] {
				released[id] = max(released[id], d)
				if j.t.Priority == jobs.Opportunistic {
					oppReleased[id] = true
				}
			}
		}
	}
	gaveBack, wait := false, 0.0
	for i, tg := range p.Targets {
		j := e.active[i]
		if tg.Workers == j.workers {
			j.placement = tg.Placement
			continue
		}
		var delay float64 // waiting for GPUs another job gives back
		fromOpp := false
		for id, w := range tg.Placement {
			if w > j.placement[id] {
				delay = max(delay, released[id])
				fromOpp = fromOpp || oppReleased[id]
			}
		}
		cost := 0.0
		switch {
		case j.workers == 0 && !j.started:
			j.started, j.start = true, e.now
		case j.workers == 0: // resumed after a preemption
			cost = e.o.RestartCost.Seconds()
			j.resizes++
		case tg.Workers > j.workers:
			cost = e.costs.Join.Seconds()
			j.resizes++
			j.lastResize = now
		case tg.Workers > 0:
			cost = e.costs.Leave.Seconds()
			j.resizes++
			j.lastResize = now
		default: // preempted: it checkpoints, and resumes from there
			j.checkpoint()
			j.stall = 0
			j.resizes++
		}
		if tg.Workers > 0 && j.workers > 0 && e.costs.Rollback {
			j.rollback()
		}
		if tg.Workers > 0 {
			j.stall = delay + cost
			if fromOpp && j.t.Priority != jobs.Opportunistic {
				gaveBack = true
				wait = max(wait, delay+cost)
			}
		}
		j.workers, j.placement = tg.Workers, tg.Placement
		j.maxWorkers = max(j.maxWorkers, j.workers)
	}
	if gaveBack {
		e.givebacks++
		e.givebackS += wait
	}
}

// serviceHistory is the Gittins summary of the finished jobs' service for
// the elastic policy (nil for the others, and until enough jobs finished).
func (e *engine) serviceHistory() *planner.ServiceHistory {
	if !e.o.gittins() || len(e.finished) < planner.MinServiceHistory {
		return nil
	}
	if e.histN != len(e.finished) {
		// Live jobs count as censored: they need at least what they have
		// had (known now, not a peek at the trace).
		live := make([]float64, len(e.active))
		for i, j := range e.active {
			live[i] = j.attained
		}
		h, err := planner.NewServiceHistory(e.finished, live)
		if err != nil { // every finished job attained service > 0
			panic(fmt.Sprintf("simulate: %v", err))
		}
		e.history, e.histN = h, len(e.finished)
	}
	return e.history
}

// nextEvent is the time of the next arrival, completion or Tiresias
// demotion. Cooldown ends (Plan.Recheck) are not events: a cooldown only
// matters when a plan compacts, and compaction happens on arrivals.
func (e *engine) nextEvent() float64 {
	t := math.Inf(1)
	if e.next < len(e.all) {
		t = e.all[e.next].t.Submit
	}
	for _, s := range e.sweeps {
		switch {
		case !s.started:
			t = min(t, s.a.Submit)
		case s.live():
			t = min(t, s.nextRound)
		}
	}
	thr := e.cfg.QueueThreshold
	for _, j := range e.active {
		if j.workers == 0 {
			continue
		}
		t = min(t, e.now+j.timeToFinish())
		if f := (j.nextFail - j.attained) / float64(j.workers); f > eps {
			t = min(t, e.now+f)
		}
		// A demotion closer than eps is as good as done: waiting for it
		// would not move the clock.
		// Under OracleOrder a running job's rank only improves: no event.
		b := e.nextBound(j.attained)
		if h := e.serviceHistory(); h != nil {
			b = h.NextChange(e.cfg, j.attained)
		}
		if thr >= 0 && !e.o.oracle() && !math.IsInf(b, 1) {
			if d := (b - j.attained) / float64(j.workers); d > eps {
				t = min(t, e.now+d)
			}
		}
	}
	return t
}

// nextBound is the attained service (GPU seconds) at which a job with a
// moves to the next least-attained-service queue (+Inf in the last one).
func (e *engine) nextBound(a float64) float64 {
	thr, levels, f := e.cfg.QueueThreshold, e.cfg.QueueLevels, e.cfg.QueueFactor
	if levels <= 0 {
		levels = 2
	}
	if f <= 1 {
		f = 4
	}
	b := thr
	for q := 1; q < levels; q++ {
		if a < b-eps {
			return b
		}
		b *= f
	}
	return math.Inf(1)
}

// advance moves time to t, finishing the jobs that complete by then.
func (e *engine) advance(t float64) {
	dt := t - e.now
	kept := e.active[:0]
	for _, j := range e.active {
		if j.workers > 0 && j.timeToFinish() <= dt+eps {
			e.busy += float64(j.workers) * j.timeToFinish()
			j.finish = e.now + j.timeToFinish()
			if e.o.gittins() {
				served := j.attained + float64(j.workers)*j.timeToFinish()
				e.finished = slices.Insert(e.finished, sort.SearchFloat64s(e.finished, served), served)
			}
			j.done, j.workers, j.placement = j.t.Duration, 0, nil
			continue
		}
		e.busy += float64(j.workers) * dt
		j.advance(dt, e.period)
		if j.attained >= j.nextFail-eps {
			// A worker died and was replaced: the others stall (and, for
			// a restart, go back to the last checkpoint).
			e.failures++
			j.failures++
			j.stall = max(j.stall, e.costs.Failure.Seconds())
			if e.costs.Rollback {
				j.rollback()
			}
			j.drawFailure(e.o.meanGPUSecondsBetweenFailures())
		}
		kept = append(kept, j)
	}
	clear(e.active[len(kept):])
	e.active = kept
	e.now = t
}
