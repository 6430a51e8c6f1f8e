package sim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edl-nomad/edl/planner"
)

// Policy names a scheduling policy the simulator can run.
type Policy string

const (
	// Elastic is edl: E-Tiresias through planner.Decide, jobs between
	// MinFactor and MaxFactor of their request, stop-free resizes.
	Elastic Policy = "elastic"
	// ElasticRestart is the same policy paying a stop-and-restart cost per
	// resize (TorchElastic-style systems).
	ElasticRestart Policy = "elastic-restart"
	// FIFO is static gangs, first come first served, never preempted; a
	// later job starts when it fits and an earlier one does not (backfill).
	FIFO Policy = "fifo"
	// Tiresias is static gangs in two-level least-attained-service order,
	// preemptive; a preempted job pays the restart cost when it resumes.
	Tiresias Policy = "tiresias"
)

// Policies is every policy, in the order --compare runs them.
var Policies = []Policy{FIFO, Tiresias, ElasticRestart, Elastic}

// ResizeCosts is what one change of a running job's worker count costs the
// job: a stall of all its workers, and with Rollback the progress made since
// its last checkpoint (the job restarts from it).
type ResizeCosts struct {
	Join, Leave time.Duration
	// Failure is the stall when a worker dies and is replaced (with
	// Rollback the job also restarts from its last checkpoint).
	Failure time.Duration
	// Rollback: every resize restarts the job from its last checkpoint.
	Rollback bool
}

// StopFreeCosts are edl's measured stop-free pauses (`edl bench elastic`):
// the running workers stall about 47 ms while one joins at a step boundary
// and 14 ms while one leaves; nothing is rolled back.
var StopFreeCosts = ResizeCosts{Join: 47 * time.Millisecond, Leave: 14 * time.Millisecond, Failure: 600 * time.Millisecond}

// RestartCosts are torchrun's measured stalls (elastic agent, c10d
// rendezvous): 3.8 s for a join, 16 s for a leave, 4.1 s for a failed
// worker, and the job resumes from its last checkpoint.
var RestartCosts = ResizeCosts{Join: 3800 * time.Millisecond, Leave: 16 * time.Second, Failure: 4100 * time.Millisecond, Rollback: true}

// Options is one simulation.
type Options struct {
	Policy      Policy
	GPUs        int
	GPUsPerNode int
	// Load multiplies the arrival rate: submit times are divided by it
	// (0 means 1).
	Load float64
	// ResizeCost, when not negative, replaces both the join and the leave
	// stall of the policy's costs (the old single-figure model).
	ResizeCost time.Duration
	// Costs is what a resize costs; the zero value means the policy's
	// default: StopFreeCosts for elastic, RestartCosts for the others.
	Costs ResizeCosts
	// CheckpointPeriod is how often (seconds of running) a job saves a
	// checkpoint; a rollback loses the progress since the last one (0:
	// nothing).
	CheckpointPeriod time.Duration
	// FailuresPerGPUDay is the rate at which a running worker dies (and is
	// replaced at once), per GPU and day of running; 0 means none. Failure
	// times are drawn per job from its ID, so runs are reproducible.
	FailuresPerGPUDay float64
	// RestartCost is what resuming a preempted (suspended) job costs: it
	// checkpointed when suspended and starts its workers again.
	RestartCost time.Duration
	// MinFactor and MaxFactor bound elastic jobs: min = max(1,
	// round(MinFactor*request)), max = max(min, round(MaxFactor*request)).
	MinFactor, MaxFactor float64
	// QueueThreshold is the tiresias baseline's first queue bound (GPU
	// seconds; 4 h is its best on the Philly trace); the elastic policies
	// use planner.DefaultConfig's queues (1 h, then x2 for 8 levels), or
	// this one with LegacyPolicy.
	QueueThreshold float64
	// Backfill lets fifo start a later job that fits while an earlier one
	// waits (FCFS with backfilling) instead of strict first come, first
	// served.
	Backfill bool
	// TiresiasQueues is the number of least-attained-service queues of
	// the tiresias policy (2: the two-level Tiresias of the paper's
	// evaluation); the elastic policies use planner.DefaultConfig's.
	TiresiasQueues int
	// QueuePerGPU, when not negative, replaces the elastic policies'
	// planner.Config.QueueThresholdPerGPU (0, the default: absolute queue
	// bounds, from 1 GPU-hour at any cluster size; 28.125: 1 GPU-hour on
	// 128 GPUs, proportionally elsewhere).
	QueuePerGPU float64
	// LegacyPolicy runs the elastic policies with the earlier policy (two
	// queues, guaranteed growth before opportunistic minimums), to show
	// what the current one bought.
	LegacyPolicy bool
	// OracleOrder makes the elastic policies rank jobs by their remaining
	// work, read from the trace, instead of attained service (shortest
	// remaining first, in 64 fine queues): no planner can know it; it
	// measures what a perfect size estimate would buy over least attained
	// service.
	OracleOrder bool
	// LASOrder makes the elastic policies rank jobs by least attained
	// service (planner.DefaultConfig's eight queues) instead of by the
	// Gittins index learnt from the service of the jobs finished so far:
	// the earlier order, for comparison.
	LASOrder bool
	// Sweeps are hyperparameter sweeps submitted beside the trace's jobs
	// (trials.go); SweepRound is their controller's period (0:
	// DefaultSweepRound); StaticTrials runs every trial at the template's
	// workers.min, so that cut trials' GPUs are not handed on.
	Sweeps       []SweepArrival
	SweepRound   time.Duration
	StaticTrials bool
}

// DefaultOptions is policy p on the cluster size this project documents for
// the Philly trace (128 GPUs, 8 per node).
func DefaultOptions(p Policy) Options {
	return Options{
		Policy: p, GPUs: 128, GPUsPerNode: 8, Load: 1,
		ResizeCost: -1, RestartCost: 30 * time.Second,
		CheckpointPeriod: 10 * time.Minute,
		MinFactor:        0, MaxFactor: 2,
		QueueThreshold: 4 * 3600, TiresiasQueues: 2, QueuePerGPU: -1,
	}
}

// Validate names the first bad field.
func (o Options) Validate() error {
	var errs []error
	switch o.Policy {
	case Elastic, ElasticRestart, FIFO, Tiresias:
	default:
		errs = append(errs, fmt.Errorf("policy %q: want one of elastic, elastic-restart, fifo, tiresias", o.Policy))
	}
	if o.GPUs < 1 {
		errs = append(errs, fmt.Errorf("gpus %d: must be positive", o.GPUs))
	}
	if o.GPUsPerNode < 1 {
		errs = append(errs, fmt.Errorf("gpus_per_node %d: must be positive", o.GPUsPerNode))
	}
	if o.Load < 0 || math.IsNaN(o.Load) || math.IsInf(o.Load, 0) {
		errs = append(errs, fmt.Errorf("load %g: must be a positive number", o.Load))
	}
	if o.RestartCost < 0 {
		errs = append(errs, fmt.Errorf("restart_cost %s: must not be negative", o.RestartCost))
	}
	if o.Costs.Join < 0 || o.Costs.Leave < 0 || o.Costs.Failure < 0 {
		errs = append(errs, fmt.Errorf("resize costs join %s, leave %s, failure %s: must not be negative", o.Costs.Join, o.Costs.Leave, o.Costs.Failure))
	}
	if o.FailuresPerGPUDay < 0 || math.IsNaN(o.FailuresPerGPUDay) || math.IsInf(o.FailuresPerGPUDay, 0) {
		errs = append(errs, fmt.Errorf("failures_per_gpu_day %g: must be a non-negative number", o.FailuresPerGPUDay))
	}
	if o.CheckpointPeriod < 0 {
		errs = append(errs, fmt.Errorf("checkpoint_period %s: must not be negative", o.CheckpointPeriod))
	}
	for i, a := range o.Sweeps {
		if err := a.validate(o.GPUs); err != nil {
			errs = append(errs, fmt.Errorf("sweep %d (%s): %w", i, a.ID, err))
		}
	}
	if o.SweepRound < 0 {
		errs = append(errs, fmt.Errorf("sweep_round %s: must not be negative", o.SweepRound))
	}
	if o.TiresiasQueues < 0 {
		errs = append(errs, fmt.Errorf("tiresias_queues %d: must not be negative", o.TiresiasQueues))
	}
	if (o.OracleOrder || o.LegacyPolicy) && o.LASOrder {
		errs = append(errs, errors.New("las_order with oracle_order or legacy_policy: choose one"))
	}
	if o.OracleOrder && o.LegacyPolicy {
		errs = append(errs, errors.New("oracle_order and legacy_policy: choose one"))
	}
	if math.IsNaN(o.QueueThreshold) || math.IsInf(o.QueueThreshold, 0) || math.IsNaN(o.QueuePerGPU) || math.IsInf(o.QueuePerGPU, 0) {
		errs = append(errs, fmt.Errorf("queue_threshold %g, queue_per_gpu %g: must be finite numbers", o.QueueThreshold, o.QueuePerGPU))
	}
	if !(o.MinFactor >= 0) || !(o.MaxFactor > 0) || math.IsInf(o.MaxFactor, 0) || o.MinFactor > o.MaxFactor {
		errs = append(errs, fmt.Errorf("min_factor %g, max_factor %g: want 0 <= min_factor <= max_factor, max_factor > 0", o.MinFactor, o.MaxFactor))
	}
	return errors.Join(errs...)
}

// elastic reports whether the policy resizes jobs.
func (o Options) elastic() bool { return o.Policy == Elastic || o.Policy == ElasticRestart }

// load is the arrival-rate factor (0 means 1).
func (o Options) load() float64 {
	if o.Load == 0 {
		return 1
	}
	return o.Load
}

// costs is what one resize costs under the options.
func (o Options) costs() ResizeCosts {
	c := o.Costs
	if c == (ResizeCosts{}) {
		c = RestartCosts
		if o.Policy == Elastic {
			c = StopFreeCosts
		}
	}
	if o.ResizeCost >= 0 {
		c.Join, c.Leave = o.ResizeCost, o.ResizeCost
	}
	return c
}

// meanGPUSecondsBetweenFailures is 1/FailuresPerGPUDay in GPU seconds (0:
// no failures).
func (o Options) meanGPUSecondsBetweenFailures() float64 {
	if o.FailuresPerGPUDay <= 0 {
		return 0
	}
	return 86400 / o.FailuresPerGPUDay
}

// plannerResizeCost is the mean progress one resize costs, as the planner
// is told it: the mean of join and leave, plus half a checkpoint period
// when a resize rolls back.
func (o Options) plannerResizeCost() time.Duration {
	c := o.costs()
	d := (c.Join + c.Leave) / 2
	if c.Rollback {
		d += o.CheckpointPeriod / 2
	}
	return d
}

// bounds is a job's worker range under the policy.
func (o Options) bounds(request int) (lo, hi int) {
	if !o.elastic() {
		return request, request
	}
	lo = max(1, int(o.MinFactor*float64(request)+0.5))
	hi = max(lo, int(o.MaxFactor*float64(request)+0.5))
	return lo, min(hi, max(o.GPUs, lo))
}

// oracleQueueThreshold is OracleOrder's first queue bound (GPU seconds of
// remaining work).
const oracleQueueThreshold = 60

// oracle reports whether jobs are ranked by their known remaining work.
func (o Options) oracle() bool { return o.OracleOrder && o.elastic() }

// gittins reports whether the elastic policy ranks jobs by the Gittins
// index of the finished jobs' service (the engine hands Decide the history).
func (o Options) gittins() bool {
	return o.elastic() && !o.OracleOrder && !o.LegacyPolicy && !o.LASOrder
}

// config is the planner configuration that makes Decide the policy.
func (o Options) config() planner.Config {
	c := planner.DefaultConfig()
	c.ResizeCost = o.plannerResizeCost()
	switch o.Policy {
	case FIFO:
		c.QueueThreshold = -1                   // first come, first served
		c.CompactThreshold = int(^uint(0) >> 1) // never preempt
		c.StrictOrder = !o.Backfill
	case Tiresias:
		c.CompactThreshold = 0 // preempt as soon as a job waits
	}
	if o.elastic() && o.QueuePerGPU >= 0 {
		c.QueueThresholdPerGPU = o.QueuePerGPU
	}
	if !o.elastic() {
		c.QueueThreshold, c.QueueLevels = o.QueueThreshold, o.TiresiasQueues
		c.QueueThresholdPerGPU = 0 // Tiresias' thresholds are absolute
	}
	if o.OracleOrder && o.elastic() {
		c.QueueThreshold, c.QueueLevels, c.QueueFactor = oracleQueueThreshold, 64, 1.3
		c.QueueThresholdPerGPU = 0
	}
	if o.LegacyPolicy && o.elastic() {
		c.QueueThreshold, c.QueueLevels, c.QueueFactor, c.HarvestFirst = o.QueueThreshold, 2, 4, false
		c.QueueThresholdPerGPU = 0
	}
	if !o.gittins() {
		c.GittinsThreshold = 0 // baselines, oracle, legacy: no Gittins ranking
	}
	return c.ForCluster(o.GPUs)
}
