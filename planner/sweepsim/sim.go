package sweepsim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
)

// Config is one simulated sweep and its cluster.
type Config struct {
	Spec sweep.Spec // the sweep as submitted (after WithDefaults, valid)
	// GPUs is the cluster's slots (0: the sweep's budget, Spec.Budget: the
	// cluster a static sweep needs).
	GPUs int
	// StepS is a step's time at one worker; Overhead the parallel cost per
	// added worker: a trial at n workers runs n / (1 + Overhead x (n-1))
	// times faster (Amdahl-like; 0.1: 1.82x at 2, 3.08x at 4).
	StepS, Overhead float64
	// StartS: a job's submission to its first step; ResizeS: the stall of
	// a resize (edl's stop-free join); StopS: how long a cancelled job
	// still holds its workers; MeasureS: how long a trial runs at a size
	// before its throughput there is known (the planner's measurement).
	StartS, ResizeS, StopS, MeasureS float64
	// RoundS is the controller's period (planner/sweeploop: 250 ms).
	RoundS float64
	// ReportEvery: a trial reports its metric every this many steps (1: every step).
	ReportEvery int64
	// StepsPerEpoch sets each point's epoch (steps / StepsPerEpoch) for a
	// scheduler in epochs; 0: every point at epoch 0.
	StepsPerEpoch int64
	Curves        Curves
	// MaxSimS bounds the simulated time (0: 30 days).
	MaxSimS float64
	// KeepZeros takes StepS, Overhead, StartS, ResizeS, StopS and
	// ReportEvery as given, zeros included (edl sim, whose flags carry the
	// defaults: --overhead 0 is perfect scaling, a cost of 0 is none, and
	// --step-s 0 is refused); without it Defaults replaces their zeros.
	KeepZeros bool
}

// Defaults fills what is zero with the figures measured on edl dev.
func (c Config) Defaults() Config {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if !c.KeepZeros {
		def(&c.StepS, 0.1)
		def(&c.Overhead, 0.1)
		def(&c.StartS, 2)
		def(&c.ResizeS, 0.2)
		def(&c.StopS, 0.5)
		if c.ReportEvery == 0 {
			c.ReportEvery = 1
		}
	}
	def(&c.MeasureS, 1)
	def(&c.RoundS, 0.25)
	def(&c.MaxSimS, 30*24*3600)
	if c.GPUs == 0 {
		c.GPUs = c.Spec.Budget()
	}
	return c
}

// Validate names the first field at fault.
func (c Config) Validate() error {
	if err := c.Spec.Validate(); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	switch {
	case c.GPUs < max(c.Spec.Template.Workers.Min, 1):
		return fmt.Errorf("gpus %d: fewer than one trial's workers.min (%d)", c.GPUs, c.Spec.Template.Workers.Min)
	case !(c.StepS > 0):
		return fmt.Errorf("step_s %g: must be > 0", c.StepS)
	case !(c.RoundS > 0):
		return fmt.Errorf("round_s %g: must be > 0", c.RoundS)
	case !(c.Overhead >= 0):
		return fmt.Errorf("overhead %g: must be >= 0", c.Overhead)
	case !(c.StartS >= 0):
		return fmt.Errorf("start_s %g: must be >= 0", c.StartS)
	case !(c.ResizeS >= 0):
		return fmt.Errorf("resize_s %g: must be >= 0", c.ResizeS)
	case !(c.StopS >= 0):
		return fmt.Errorf("stop_s %g: must be >= 0", c.StopS)
	case !(c.MeasureS >= 0):
		return fmt.Errorf("measure_s %g: must be >= 0", c.MeasureS)
	case c.ReportEvery < 1:
		return fmt.Errorf("report_every %d: must be >= 1", c.ReportEvery)
	case c.StepsPerEpoch < 0:
		return fmt.Errorf("steps_per_epoch %d: must be >= 0", c.StepsPerEpoch)
	case c.Curves == nil:
		return errors.New("no curves")
	}
	return c.Curves.Check(c.Spec.NumTrials)
}

// Speedup is a trial's speed at n workers relative to one.
func (c Config) Speedup(n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64(n) / (1 + c.Overhead*float64(n-1))
}

// Result is one mode's figures, with the names of `edl bench sweep --json`.
type Result struct {
	Mode     string  `json:"mode"` // elastic or static
	Trials   int     `json:"trials"`
	GPUs     int     `json:"gpus"`
	WallS    float64 `json:"wall_s"`
	SlotUsed float64 `json:"slot_s_used"`
	SlotIdle float64 `json:"slot_s_idle"`
	// IdleWhileGrowable: free slot-seconds while every trial had started
	// and a running one was below its workers.max.
	IdleWhileGrowable float64        `json:"idle_while_growable_slot_s"`
	BestIndex         int            `json:"best_index"`
	BestTrial         map[string]any `json:"best_trial"`
	BestMetric        float64        `json:"best_metric"`
	// OracleBest is the trial whose curve is best at scheduler.max: what
	// a sweep that cut nobody would find.
	OracleBest int `json:"oracle_best_index"`
	Cut        int `json:"cut"`
	Completed  int `json:"completed"`
	// Grown counts the grows the cluster carried out (a grow the
	// controller pinned where no slot was free is not one).
	Grown           int `json:"grown"`
	MaxTrialWorkers int `json:"max_trial_workers"`
}

// job is a trial's simulated job.
type job struct {
	state      jobs.State
	min, max   int
	pinned     int     // the size the controller pinned
	held       int     // slots it holds
	startAt    float64 // Pending: when placed, its first step comes at startAt
	busyUntil  float64 // a resize's stall, or a cancelled job's wind-down
	steps      float64 // steps done (fractional)
	reported   int64   // the last step reported
	points     []sweep.Point
	sizeSince  float64 // when it reached its current size
	throughput map[int]float64
	endedAt    time.Time
}

// Run simulates the sweep in cfg until it ends.
func Run(cfg Config, mode string) (Result, error) {
	cfg = cfg.Defaults()
	spec := cfg.Spec.WithDefaults()
	if mode == "static" {
		spec.Template.Workers.Max = spec.Template.Workers.Min
	} else if mode != "elastic" {
		return Result{}, fmt.Errorf("mode %q: want elastic or static", mode)
	}
	cfg.Spec = spec
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	epoch0 := time.Unix(0, 0).UTC()
	sw := sweep.Sweep{ID: "sim", State: sweep.Running, Spec: spec, Trials: sweep.NewTrials(spec)}
	js := map[int]*job{}
	byID := map[string]int{}
	res := Result{Mode: mode, Trials: spec.NumTrials, GPUs: cfg.GPUs, BestIndex: -1}
	free := func() int {
		n := cfg.GPUs
		for _, j := range js {
			n -= j.held
		}
		return n
	}
	dt := cfg.RoundS
	now := 0.0
	for ; ; now += dt {
		if now > cfg.MaxSimS {
			return res, fmt.Errorf("the sweep did not end within %.0f simulated seconds", cfg.MaxSimS)
		}
		at := epoch0.Add(time.Duration(now * float64(time.Second)))
		obs := make(map[int]sweep.Observation, len(js))
		for i, j := range js {
			obs[i] = sweep.Observation{JobState: j.state, Current: j.held, Min: j.min, Max: j.max,
				Points: j.points, EndedAt: j.endedAt, Throughput: j.throughput}
		}
		plan := sweep.Decide(sw, obs, at)
		for _, i := range plan.Start {
			ts, err := sweep.TrialSpec(spec, sw.ID, i, plan.Sweep.Trials[i].Params)
			if err != nil {
				return res, fmt.Errorf("trial %d: %w", i, err)
			}
			js[i] = &job{state: jobs.Pending, min: ts.Workers.Min, max: ts.Workers.Max, startAt: -1, throughput: map[int]float64{}}
			plan.Sweep.Trials[i].JobID = fmt.Sprintf("sim-%d", i)
			byID[plan.Sweep.Trials[i].JobID] = i
		}
		for i, n := range plan.Pin {
			js[i].pinned = n
		}
		for id := range plan.Cancel {
			if j := js[byID[id]]; !j.state.Terminal() && j.state != jobs.Cancelling {
				j.state, j.busyUntil = jobs.Cancelling, now+cfg.StopS
			}
		}
		sw = plan.Sweep
		if sw.State.Terminal() {
			break
		}
		// The planner: place pinned gangs, resize; then a round of training.
		growable := false
		allStarted := true
		for _, t := range sw.Trials {
			if t.State == sweep.TrialPending {
				allStarted = false
			}
		}
		for i := range sw.Trials {
			j := js[i]
			if j == nil {
				continue
			}
			switch {
			case j.state == jobs.Cancelling:
				if now >= j.busyUntil {
					j.state, j.held, j.endedAt = jobs.Cancelled, 0, at
				}
			case j.state == jobs.Pending && j.startAt < 0 && j.pinned > 0 && free() >= j.pinned:
				j.held, j.startAt = j.pinned, now+cfg.StartS
			case j.state == jobs.Pending && j.startAt >= 0 && now >= j.startAt:
				j.state, j.sizeSince = jobs.Running, now
			case j.state == jobs.Running && now >= j.busyUntil && j.pinned != j.held:
				if add := j.pinned - j.held; add <= free() {
					if add > 0 { // grown on the cluster, not only pinned larger
						res.Grown++
					}
					j.held, j.busyUntil, j.sizeSince = j.pinned, now+cfg.ResizeS, now+cfg.ResizeS
				}
			}
			if j.state == jobs.Running {
				res.MaxTrialWorkers = max(res.MaxTrialWorkers, j.held)
				if j.held < j.max {
					growable = true
				}
				run := dt
				if j.busyUntil > now {
					run = max(0, now+dt-j.busyUntil)
				}
				j.steps += run * cfg.Speedup(j.held) / cfg.StepS
				if now+dt-j.sizeSince >= cfg.MeasureS {
					j.throughput[j.held] = cfg.Speedup(j.held) / cfg.StepS
				}
				for s := j.reported + cfg.ReportEvery; s <= int64(j.steps); s += cfg.ReportEvery {
					p := sweep.Point{Step: s, Value: cfg.Curves.Value(i, s)}
					if cfg.StepsPerEpoch > 0 {
						p.Epoch = int(s / cfg.StepsPerEpoch)
					}
					j.points = append(j.points, p)
					j.reported = s
				}
			}
		}
		f := float64(free())
		res.SlotUsed += (float64(cfg.GPUs) - f) * dt
		if allStarted && growable {
			res.IdleWhileGrowable += f * dt
		}
	}
	res.WallS = now
	res.SlotIdle = float64(cfg.GPUs)*now - res.SlotUsed
	n := sw.TrialCounts()
	res.Cut, res.Completed = n[sweep.TrialCut], n[sweep.TrialCompleted]
	if b := sw.Best; b != nil {
		res.BestIndex, res.BestTrial, res.BestMetric = b.Trial, b.Params, b.Metric
	}
	res.OracleBest = oracle(cfg, spec)
	return res, nil
}

// oracle is the trial whose curve is best at the last milestone.
func oracle(cfg Config, spec sweep.Spec) int {
	ms := spec.Scheduler.Milestones()
	at := ms[len(ms)-1]
	if spec.Scheduler.Unit == sweep.UnitEpochs && cfg.StepsPerEpoch > 0 {
		at *= cfg.StepsPerEpoch
	}
	best, bv := -1, math.NaN()
	for i := range spec.NumTrials {
		v := cfg.Curves.Value(i, at)
		if best < 0 || spec.Metric.Better(v, bv) {
			best, bv = i, v
		}
	}
	return best
}

// Comparison is the elastic run against the static one.
type Comparison struct {
	Elastic, Static Result
	WallRatio       float64 `json:"wall_ratio"`      // elastic / static
	SlotUsedRatio   float64 `json:"slot_s_ratio"`    // elastic / static slot-seconds used
	SameBest        bool    `json:"same_best_trial"` // both found the same trial
}

// Compare runs the sweep elastic and static.
func Compare(cfg Config) (Comparison, error) {
	e, err := Run(cfg, "elastic")
	if err != nil {
		return Comparison{}, fmt.Errorf("elastic: %w", err)
	}
	s, err := Run(cfg, "static")
	if err != nil {
		return Comparison{}, fmt.Errorf("static: %w", err)
	}
	return Comparison{Elastic: e, Static: s, WallRatio: e.WallS / s.WallS, SlotUsedRatio: e.SlotUsed / s.SlotUsed,
		SameBest: e.BestIndex == s.BestIndex}, nil
}
