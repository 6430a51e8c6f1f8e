package sim

import (
	"errors"
	"fmt"
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

// Options is one simulation.
type Options struct {
	Policy      Policy
	GPUs        int
	GPUsPerNode int
	// ResizeCost is the progress lost per resize; negative means the
	// policy's default (1 s for elastic, RestartCost for the others).
	ResizeCost time.Duration
	// RestartCost is what a stop-and-restart resize or a preemption costs
	// (elastic-restart's resizes, Tiresias' resumes).
	RestartCost time.Duration
	// MinFactor and MaxFactor bound elastic jobs: min = max(1,
	// round(MinFactor*request)), max = max(min, round(MaxFactor*request)).
	MinFactor, MaxFactor float64
	// QueueThreshold is Tiresias' two-level threshold (GPU seconds), used
	// by tiresias and both elastic policies.
	QueueThreshold float64
	// Backfill lets fifo start a later job that fits while an earlier one
	// waits (FCFS with backfilling) instead of strict first come, first
	// served.
	Backfill bool
}

// DefaultOptions is policy p on the cluster size this project documents for
// the Philly trace (128 GPUs, 8 per node).
func DefaultOptions(p Policy) Options {
	return Options{
		Policy: p, GPUs: 128, GPUsPerNode: 8,
		ResizeCost: -1, RestartCost: 30 * time.Second,
		MinFactor: 0, MaxFactor: 2,
		QueueThreshold: 4 * 3600,
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
	if o.RestartCost < 0 {
		errs = append(errs, fmt.Errorf("restart_cost %s: must not be negative", o.RestartCost))
	}
	if o.MinFactor < 0 || o.MaxFactor <= 0 || (o.MinFactor > o.MaxFactor) {
		errs = append(errs, fmt.Errorf("min_factor %g, max_factor %g: want 0 <= min_factor <= max_factor, max_factor > 0", o.MinFactor, o.MaxFactor))
	}
	return errors.Join(errs...)
}

// elastic reports whether the policy resizes jobs.
func (o Options) elastic() bool { return o.Policy == Elastic || o.Policy == ElasticRestart }

// resizeCost is the stall one change of a running job's size costs.
func (o Options) resizeCost() time.Duration {
	if o.ResizeCost >= 0 {
		return o.ResizeCost
	}
	if o.Policy == Elastic {
		return time.Second
	}
	return o.RestartCost
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

// config is the planner configuration that makes Decide the policy.
func (o Options) config() planner.Config {
	c := planner.DefaultConfig()
	c.ResizeCost = o.resizeCost()
	c.QueueThreshold = o.QueueThreshold
	switch o.Policy {
	case FIFO:
		c.QueueThreshold = -1                   // first come, first served
		c.CompactThreshold = int(^uint(0) >> 1) // never preempt
		c.StrictOrder = !o.Backfill
	case Tiresias:
		c.CompactThreshold = 0 // preempt as soon as a job waits
	}
	return c
}
