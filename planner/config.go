package planner

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config tunes Decide. The zero value is replaced by DefaultConfig().
type Config struct {
	// Cooldown is how long after a resize a job is neither shrunk to feed
	// other jobs' growth nor grown ahead of jobs that are not cooling down.
	// Guaranteed minimums override it.
	Cooldown time.Duration
	// ResizeCost is the progress a job loses to one resize (edl's stop-free
	// scaling: about a second; stop-and-restart systems: tens of seconds).
	// Growth steps that change a job's size are ranked lower by
	// ResizeCost/Horizon of its speed; steps that avoid a shrink higher.
	ResizeCost time.Duration
	// Horizon is the time over which a resize must pay for itself.
	Horizon time.Duration
	// Hysteresis is a fixed share of a job's speed that a step changing its
	// size must beat, on top of ResizeCost/Horizon: it damps churn that a
	// cheap resize would not (the trace simulator finds 0.05 best).
	Hysteresis float64
	// StrictOrder stops admission at the first guaranteed job whose
	// minimum does not fit: no later job starts before it (strict first
	// come, first served). By default later jobs that fit start (backfill).
	StrictOrder bool
	// CompactThreshold: when more than this many guaranteed jobs would wait
	// for their minimum while running jobs keep their size, running jobs are
	// compacted to their minimum and the spare GPUs handed out again.
	CompactThreshold int
	// QueueThreshold is Tiresias' two-level discretisation: a job that has
	// attained less service (GPU seconds) than this is in the high-priority
	// queue. Negative disables least-attained-service ordering (plain
	// first come, first served).
	QueueThreshold float64
	// QueueThresholdPerGPU, when positive, replaces QueueThreshold by this
	// many GPU seconds per GPU of the cluster (every node's GPUs in the
	// snapshot): the queues then hold the same share of the cluster's time
	// whatever its size. Off by default: on the trace simulator's sweep of
	// Philly's virtual clusters (docs/planner.md) it helps where every job
	// asks for one GPU and loses where jobs are wide.
	QueueThresholdPerGPU float64
	// QueueLevels is the number of least-attained-service queues: a job
	// with less than QueueThreshold is in queue 0, then each queue holds
	// QueueFactor times more attained service than the one before, the
	// last queue has no bound. 0 means 2 (Tiresias' two levels).
	QueueLevels int
	// QueueFactor is the ratio of successive queue bounds (0 means 4).
	QueueFactor float64
	// HarvestFirst places opportunistic jobs' minimums before guaranteed
	// jobs past the first queue (QueueThreshold of attained service) grow
	// past theirs. Guaranteed minimums, and the growth of guaranteed jobs
	// still in the first queue, come first and take GPUs back from
	// opportunistic jobs: starting a harvester gains more than making a
	// long guaranteed job a little faster. Without opportunistic jobs in
	// the snapshot it changes nothing.
	HarvestFirst bool
	// GittinsThreshold, GittinsFactor and GittinsLevels rank jobs when the
	// snapshot carries a ServiceHistory of at least MinServiceHistory
	// finished jobs: a job's queue is then its Gittins rank (GPU seconds
	// per expected completion, learnt from the finished jobs' service)
	// bucketed like the attained-service queues: below GittinsThreshold
	// queue 0, each next bound GittinsFactor times the one before,
	// GittinsLevels queues. GittinsThreshold 0 ranks by least attained
	// service even with a history.
	GittinsThreshold float64
	GittinsFactor    float64
	GittinsLevels    int
	// GittinsFirstQueue, with Gittins ranking, puts a job that has
	// attained less than this (GPU seconds) ahead of every Gittins rank,
	// as Tiresias' first queue; 0: none, every job by its rank. With
	// GittinsFirstQueuePerGPU it is the bound's upper limit.
	GittinsFirstQueue float64
	// GittinsFirstQueuePerGPU, when positive, sizes the first queue to the
	// cluster: this many GPU seconds per GPU, at least GittinsFirstQueueMin
	// and at most GittinsFirstQueue (defaults: 7.5 GPU-minutes per GPU, so
	// 1 GPU-hour up to 8 GPUs, 2 at 16, Tiresias' 4 from 32 on). A job in
	// the first queue is not preempted by a fresh one: on a large cluster a
	// burst of similar jobs of 1-4 GPU-hours then finishes in order instead
	// of taking turns, while on a small one a long job cannot hold a large
	// share of the GPUs for hours ahead of short ones.
	GittinsFirstQueuePerGPU float64
	GittinsFirstQueueMin    float64
	// firstQueueSized is the first queue's bound as ForCluster sized it
	// (0: not sized; GittinsFirstQueue applies). The fields above stay as
	// given, so that sizing again, for another cluster, starts from them.
	firstQueueSized float64
	// CommRatio is the scaling model's communication-to-compute ratio used
	// until a job has two throughput measurements (see ScalingModel).
	CommRatio float64
	// Straggler tunes straggler replacement; the zero value turns it off.
	Straggler StragglerConfig
	// DecisionLatency is how long after a change a deadline plan expects
	// for it (the loop's round interval): every change the plan makes
	// after now stalls the job this long on top of ResizeCost.
	DecisionLatency time.Duration
}

// DefaultConfig is the policy edl ships with.
func DefaultConfig() Config {
	return Config{
		Cooldown:          2 * time.Minute,
		ResizeCost:        time.Second,
		Horizon:           10 * time.Minute,
		Hysteresis:        0.05,
		CompactThreshold:  0,
		QueueThreshold:    3600,
		QueueLevels:       8,
		QueueFactor:       2,
		HarvestFirst:      true,
		GittinsThreshold:  60,
		GittinsFactor:     1.3,
		GittinsLevels:     64,
		GittinsFirstQueue: 14400,
		// 450 GPU seconds per GPU, within [1 h, 4 h] of GPU time.
		GittinsFirstQueuePerGPU: 450,
		GittinsFirstQueueMin:    3600,
		CommRatio:               0.05,
	}
}

// Validate reports every field that is out of range, one error each, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Cooldown < 0 {
		errs = append(errs, fmt.Errorf("planner config: cooldown %s: must not be negative", c.Cooldown))
	}
	if c.ResizeCost < 0 {
		errs = append(errs, fmt.Errorf("planner config: resize_cost %s: must not be negative", c.ResizeCost))
	}
	if c.Horizon <= 0 {
		errs = append(errs, fmt.Errorf("planner config: horizon %s: must be positive", c.Horizon))
	}
	if c.Hysteresis < 0 {
		errs = append(errs, fmt.Errorf("planner config: hysteresis %g: must not be negative", c.Hysteresis))
	}
	if c.CompactThreshold < 0 {
		errs = append(errs, fmt.Errorf("planner config: compact_threshold %d: must not be negative", c.CompactThreshold))
	}
	if c.QueueLevels < 0 {
		errs = append(errs, fmt.Errorf("planner config: queue_levels %d: must not be negative", c.QueueLevels))
	}
	if c.QueueFactor != 0 && !(c.QueueFactor > 1) {
		errs = append(errs, fmt.Errorf("planner config: queue_factor %g: must be above 1 (or 0 for the default 4)", c.QueueFactor))
	}
	if c.QueueThresholdPerGPU < 0 {
		errs = append(errs, fmt.Errorf("planner config: queue_threshold_per_gpu %g: must not be negative", c.QueueThresholdPerGPU))
	}
	if c.GittinsThreshold < 0 || math.IsNaN(c.GittinsThreshold) || math.IsInf(c.GittinsThreshold, 0) {
		errs = append(errs, fmt.Errorf("planner config: gittins_threshold %g: must be a non-negative number", c.GittinsThreshold))
	}
	if c.GittinsThreshold > 0 && !(c.GittinsFactor > 1) {
		errs = append(errs, fmt.Errorf("planner config: gittins_factor %g: must be above 1", c.GittinsFactor))
	}
	if c.GittinsThreshold > 0 && c.GittinsLevels < 2 {
		errs = append(errs, fmt.Errorf("planner config: gittins_levels %d: must be at least 2", c.GittinsLevels))
	}
	if c.GittinsFirstQueuePerGPU < 0 || math.IsNaN(c.GittinsFirstQueuePerGPU) || math.IsInf(c.GittinsFirstQueuePerGPU, 0) {
		errs = append(errs, fmt.Errorf("planner config: gittins_first_queue_per_gpu %g: must be a non-negative number", c.GittinsFirstQueuePerGPU))
	}
	if c.GittinsFirstQueueMin < 0 || math.IsNaN(c.GittinsFirstQueueMin) || math.IsInf(c.GittinsFirstQueueMin, 0) {
		errs = append(errs, fmt.Errorf("planner config: gittins_first_queue_min %g: must be a non-negative number", c.GittinsFirstQueueMin))
	}
	if c.GittinsFirstQueue < 0 || math.IsNaN(c.GittinsFirstQueue) {
		errs = append(errs, fmt.Errorf("planner config: gittins_first_queue %g: must not be negative", c.GittinsFirstQueue))
	}
	if c.GittinsFirstQueuePerGPU > 0 && c.GittinsFirstQueueMin > c.GittinsFirstQueue {
		errs = append(errs, fmt.Errorf("planner config: gittins_first_queue_min %g: must not exceed gittins_first_queue %g, its upper limit", c.GittinsFirstQueueMin, c.GittinsFirstQueue))
	}
	if c.CommRatio < 0 || c.CommRatio >= 1 {
		errs = append(errs, fmt.Errorf("planner config: comm_ratio %g: must be in [0, 1)", c.CommRatio))
	}
	if c.DecisionLatency < 0 {
		errs = append(errs, fmt.Errorf("planner config: decision_latency %s: must not be negative", c.DecisionLatency))
	}
	errs = append(errs, c.Straggler.Validate())
	return errors.Join(errs...)
}

// ForCluster is the configuration Decide uses on a cluster of that many
// GPUs: with QueueThresholdPerGPU (and least-attained-service ordering on)
// QueueThreshold is that many GPU seconds per GPU.
func (c Config) ForCluster(gpus int) Config {
	if c.QueueThresholdPerGPU > 0 && c.QueueThreshold >= 0 && gpus > 0 {
		c.QueueThreshold = c.QueueThresholdPerGPU * float64(gpus)
	}
	if c.GittinsFirstQueuePerGPU > 0 && gpus > 0 {
		c.firstQueueSized = min(max(c.GittinsFirstQueuePerGPU*float64(gpus), c.GittinsFirstQueueMin), c.GittinsFirstQueue)
	}
	return c
}

// firstQueue is the bound of attained service (GPU seconds) below which the
// Gittins order keeps a job in the first queue: as ForCluster sized it,
// else GittinsFirstQueue.
func (c Config) firstQueue() float64 {
	if c.firstQueueSized > 0 {
		return c.firstQueueSized
	}
	return c.GittinsFirstQueue
}

// queueOf is the least-attained-service queue of a job with that service.
func (c Config) queueOf(attained float64) int {
	if c.QueueThreshold < 0 || attained < c.QueueThreshold {
		return 0
	}
	levels, f := c.QueueLevels, c.QueueFactor
	if levels <= 0 {
		levels = 2
	}
	if f <= 1 {
		f = 4
	}
	q, bound := 1, c.QueueThreshold*f
	for q < levels-1 && attained >= bound {
		q++
		bound *= f
	}
	return q
}

// gittins reports whether Decide ranks by h's Gittins index.
func (c Config) gittins(h *ServiceHistory) bool {
	return c.GittinsThreshold > 0 && c.QueueThreshold >= 0 && h.Len() >= MinServiceHistory
}

// gittinsOrder is the queue of a job with that attained service when
// ranked by h: below the first queue's bound (firstQueue) queue 0, ahead of every other, as
// in Tiresias; past it, 1 + the queue of its Gittins rank.
func (c Config) gittinsOrder(h *ServiceHistory, attained float64) int {
	if attained < c.firstQueue() {
		return 0
	}
	return 1 + c.gittinsQueue(h.Rank(attained))
}

// gittinsQueue is the queue of a job with that Gittins rank.
func (c Config) gittinsQueue(rank float64) int {
	q, bound := 0, c.GittinsThreshold
	for q < c.GittinsLevels-1 && rank >= bound {
		q++
		bound *= c.GittinsFactor
	}
	return q
}

// gittinsBound is the rank at which a job leaves queue q (+Inf for the
// last queue).
func (c Config) gittinsBound(q int) float64 {
	if q >= c.GittinsLevels-1 {
		return math.Inf(1)
	}
	return c.GittinsThreshold * math.Pow(c.GittinsFactor, float64(q))
}

func (c Config) isZero() bool { return c == Config{} }
