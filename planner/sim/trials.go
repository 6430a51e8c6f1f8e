package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/planner/sweepsim"
)

// Sweeps beside the trace: hyperparameter sweeps submitted to the
// simulated cluster next to the trace's jobs. Every SweepRound the sweep
// controller's own decision (sweep.Decide, as planner/sweeploop runs it)
// looks at what the trials' jobs did: it records rungs, cuts and promotes
// by ASHA, starts trials up to max_concurrent and pins the running ones to
// the sizes it picks (a cut trial's workers go to the best survivors, up
// to their workers.max). The trials are jobs like the trace's, placed by
// the same planner.Decide at their pinned size; a cut trial's job is
// cancelled and its GPUs are free at once. With StaticTrials every trial
// runs at the template's workers.min: the same sweeps without handing cut
// trials' GPUs on, to compare with.

// SweepArrival is one sweep submitted to the simulated cluster.
type SweepArrival struct {
	ID     string
	Tenant string
	// Submit is when it is submitted, in the trace's seconds (divided by
	// the load, as the jobs' submit times are).
	Submit float64
	// Spec is the sweep as submitted (defaults filled in by Validate's
	// caller: Options.Validate checks it as the API does).
	Spec sweep.Spec
	// StepS is a trial's step time at the template's workers.min; a trial
	// at n workers runs as a trace job's scaling model says.
	StepS float64
	// StepsPerEpoch places each point at its epoch for a scheduler counted
	// in epochs (required then).
	StepsPerEpoch int64
	// Curves are the trials' learning curves (the metric each reports).
	Curves sweepsim.Curves
}

// DefaultSweepRound is the simulated controller's period when
// Options.SweepRound is 0 (a real one decides every 250 ms; at a
// cluster's scale, with steps of seconds and trials of hours, every 30 s
// changes nothing but the cost of the simulation).
const DefaultSweepRound = 30 * time.Second

// maxSteps is a trial's whole run, in steps: its last rung (the
// scheduler's max); its job is that many steps of StepS at its minimum.
func (a SweepArrival) maxSteps() int64 {
	m := a.Spec.Scheduler.Max
	if a.Spec.Scheduler.Unit == sweep.UnitEpochs {
		m *= a.StepsPerEpoch
	}
	return m
}

func (a SweepArrival) validate(gpus int) error {
	if err := a.Spec.Validate(); err != nil {
		return err
	}
	switch {
	case !(a.StepS > 0) || math.IsInf(a.StepS, 0):
		return fmt.Errorf("step_s %g: must be a positive number", a.StepS)
	case a.Submit < 0 || math.IsNaN(a.Submit):
		return fmt.Errorf("submit %g: must not be negative", a.Submit)
	case a.Spec.Scheduler.Unit == sweep.UnitEpochs && a.StepsPerEpoch < 1:
		return errors.New("its scheduler counts epochs: steps_per_epoch must be positive")
	case a.Curves == nil:
		return errors.New("no learning curves")
	case max(a.Spec.Template.Workers.Min, 1) > gpus:
		return fmt.Errorf("a trial's workers.min %d: more than the cluster's %d GPUs", a.Spec.Template.Workers.Min, gpus)
	}
	return a.Curves.Check(a.Spec.NumTrials)
}

// SweepResult is one sweep's figures.
type SweepResult struct {
	ID     string  `json:"id"`
	Submit float64 `json:"submit_s"`
	// MakespanS is its submission to its end (every trial ended).
	MakespanS float64 `json:"makespan_s"`
	// GPUSeconds is what its trials' jobs held.
	GPUSeconds float64 `json:"gpu_s"`
	Cut        int     `json:"cut"`
	Completed  int     `json:"completed"`
	Grown      int     `json:"grown"`
	// MaxTrialWorkers is the largest size a trial ran at.
	MaxTrialWorkers int            `json:"max_trial_workers"`
	BestIndex       int            `json:"best_index"`
	BestTrial       map[string]any `json:"best_trial,omitempty"`
	BestMetric      float64        `json:"best_metric"`
	State           sweep.State    `json:"state"`
}

// simSweep is one sweep during a run.
type simSweep struct {
	a         SweepArrival
	sw        sweep.Sweep
	trials    map[int]*job // the trials' jobs, by trial index
	points    map[int][]sweep.Point
	byJob     map[string]int
	nextRound float64
	started   bool
	ended     float64
	grown     int // trials grown (sweep.EventGrown)
}

func (s *simSweep) live() bool { return s.started && !s.sw.State.Terminal() }

// sweepsLeft reports whether a sweep is still to come or running.
func (e *engine) sweepsLeft() bool {
	for _, s := range e.sweeps {
		if !s.started || s.live() {
			return true
		}
	}
	return false
}

// sweepRounds admits the sweeps submitted by now and runs the controller
// of every live sweep whose round is due.
func (e *engine) sweepRounds() error {
	for _, s := range e.sweeps {
		if !s.started && s.a.Submit <= e.now+eps {
			s.started, s.nextRound = true, e.now
			s.sw = sweep.Sweep{ID: s.a.ID, Tenant: s.a.Tenant, State: sweep.Running, Spec: s.a.Spec, Trials: sweep.NewTrials(s.a.Spec)}
		}
		if s.live() && s.nextRound <= e.now+eps {
			if err := e.sweepRound(s); err != nil {
				return fmt.Errorf("simulate: sweep %s: %w", s.a.ID, err)
			}
			s.nextRound = e.now + e.sweepPeriod()
		}
	}
	return nil
}

// sweepPeriod is the controller's period in seconds.
func (e *engine) sweepPeriod() float64 {
	if e.o.SweepRound > 0 {
		return e.o.SweepRound.Seconds()
	}
	return DefaultSweepRound.Seconds()
}

// sweepRound is one decision of s's controller, applied to the engine.
func (e *engine) sweepRound(s *simSweep) error {
	at := epoch.Add(time.Duration(e.now * float64(time.Second)))
	obs := make(map[int]sweep.Observation, len(s.trials))
	for i, j := range s.trials {
		s.points[i] = s.report(i, j)
		o := sweep.Observation{Current: j.workers, Min: j.lo, Max: j.hi, Points: s.points[i], Throughput: j.measured}
		switch {
		case j.cancelled:
			o.JobState = jobs.Cancelled
		case j.done >= j.t.Duration-eps && j.workers == 0:
			o.JobState = jobs.Succeeded
		case j.workers > 0:
			o.JobState = jobs.Running
		case j.started:
			o.JobState = jobs.Suspended
		default:
			o.JobState = jobs.Pending
		}
		if o.JobState.Terminal() {
			o.EndedAt = epoch.Add(time.Duration(j.finish * float64(time.Second)))
		}
		obs[i] = o
	}
	plan := sweep.Decide(s.sw, obs, at)
	for _, i := range plan.Start {
		ts, err := sweep.TrialSpec(s.a.Spec, s.sw.ID, i, plan.Sweep.Trials[i].Params)
		if err != nil {
			return fmt.Errorf("trial %d: %w", i, err)
		}
		id := fmt.Sprintf("%s-t%d", s.a.ID, i)
		lo := max(ts.Workers.Min, 1)
		hi := max(ts.Workers.Max, lo)
		if e.o.StaticTrials {
			hi = lo
		}
		prio := ts.Priority
		if prio == "" {
			prio = jobs.Guaranteed
		}
		t := TraceJob{ID: id, Tenant: s.a.Tenant, Submit: e.now, GPUs: lo, Priority: prio,
			Duration: float64(s.a.maxSteps()) * s.a.StepS}
		j := newJob(t, e.o)
		j.lo, j.hi = lo, hi
		s.trials[i], s.byJob[id] = j, i
		plan.Sweep.Trials[i].JobID = id
		e.active = append(e.active, j)
	}
	for i, n := range plan.Pin {
		if j := s.trials[i]; j != nil {
			j.pinned = n
		}
	}
	for id := range plan.Cancel {
		if j := s.trials[s.byJob[id]]; j != nil && !j.cancelled && j.finish == 0 {
			j.cancelled, j.finish = true, e.now
			j.workers, j.placement = 0, nil
			e.active = slices.DeleteFunc(e.active, func(a *job) bool { return a == j })
		}
	}
	for _, ev := range plan.Events {
		if ev.Type == sweep.EventGrown {
			s.grown++
		}
	}
	s.sw = plan.Sweep
	if s.sw.State.Terminal() {
		s.ended = e.now
	}
	return nil
}

// report is trial i's metric points up to the steps its job has done (a
// step is StepS seconds of work at its minimum size): one every 1/64 of
// the budget and one at every rung's milestone.
func (s *simSweep) report(i int, j *job) []sweep.Point {
	ps := s.points[i]
	done := int64(j.done/s.a.StepS + 1e-9)
	every := max(s.a.maxSteps()/64, 1)
	ms := s.a.Spec.Scheduler.Milestones()
	if s.a.Spec.Scheduler.Unit == sweep.UnitEpochs {
		for k := range ms {
			ms[k] *= s.a.StepsPerEpoch
		}
	}
	last := int64(0)
	if len(ps) > 0 {
		last = ps[len(ps)-1].Step
	}
	for {
		next := (last/every + 1) * every
		for _, m := range ms {
			if m > last && m < next {
				next = m
			}
		}
		if next > done {
			return ps
		}
		ps = append(ps, s.point(i, next))
		last = next
	}
}

func (s *simSweep) point(i int, step int64) sweep.Point {
	p := sweep.Point{Step: step, Value: s.a.Curves.Value(i, step)}
	if s.a.StepsPerEpoch > 0 {
		p.Epoch = int(step / s.a.StepsPerEpoch)
	}
	return p
}

// sweepResults are the sweeps' figures at the end of the run.
func (e *engine) sweepResults() []SweepResult {
	out := make([]SweepResult, 0, len(e.sweeps))
	for _, s := range e.sweeps {
		r := SweepResult{ID: s.a.ID, Submit: s.a.Submit, State: s.sw.State, BestIndex: -1, Grown: s.grown}
		r.MakespanS = s.ended - s.a.Submit
		for _, j := range s.trials {
			r.GPUSeconds += j.attained
			r.MaxTrialWorkers = max(r.MaxTrialWorkers, j.maxWorkers)
		}
		n := s.sw.TrialCounts()
		r.Cut, r.Completed = n[sweep.TrialCut], n[sweep.TrialCompleted]
		if b := s.sw.Best; b != nil {
			r.BestIndex, r.BestTrial, r.BestMetric = b.Trial, b.Params, b.Metric
		}
		out = append(out, r)
	}
	return out
}

// SweepsSummary is a run's sweeps taken together.
type SweepsSummary struct {
	Sweeps          int     `json:"sweeps"`
	MeanMakespanS   float64 `json:"sweep_makespan_mean_s"`
	P95MakespanS    float64 `json:"sweep_makespan_p95_s"`
	GPUHours        float64 `json:"sweep_gpu_h"`
	MaxTrialWorkers int     `json:"max_trial_workers"`
	Grown           int     `json:"grown"`
}

// SummarizeSweeps is the mean and p95 (nearest rank) makespan, the GPU
// hours, the largest trial and the grows of rs.
func SummarizeSweeps(rs []SweepResult) SweepsSummary {
	s := SweepsSummary{Sweeps: len(rs)}
	spans := make([]float64, 0, len(rs))
	for _, w := range rs {
		spans = append(spans, w.MakespanS)
		s.MeanMakespanS += w.MakespanS / float64(len(rs))
		s.GPUHours += w.GPUSeconds / 3600
		s.MaxTrialWorkers = max(s.MaxTrialWorkers, w.MaxTrialWorkers)
		s.Grown += w.Grown
	}
	slices.Sort(spans)
	s.P95MakespanS = percentile(spans, 95)
	return s
}
