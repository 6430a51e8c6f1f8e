package dlsim

import (
	"errors"
	"fmt"
	"time"
)

// Policy names a policy the simulator runs.
type Policy string

const (
	// Deadline is edl's serverless form: planner.Admit at submission
	// (strict jobs that cannot be guaranteed are refused), then
	// planner.PlanDeadlines every round: each job at its minimum
	// satisfactory share, earliest deadline first.
	Deadline Policy = "deadline"
	// EDF runs every job at the GPUs it asked for, earliest deadline
	// first, preemptive, no admission control (later jobs that fit start).
	EDF Policy = "edf"
	// Tiresias is planner.Decide with static gangs at the request, in
	// two-level least-attained-service order: it knows no deadlines.
	Tiresias Policy = "tiresias"
	// Elastic is planner.Decide as edl runs it today (E-Tiresias): jobs
	// between 1 GPU and MaxFactor x their request, no deadlines.
	Elastic Policy = "elastic"
)

// Policies is every policy, in the order a comparison runs them.
var Policies = []Policy{EDF, Tiresias, Elastic, Deadline}

// ResizeCosts is what a change of a job's GPUs costs it: a stall of all
// its workers.
type ResizeCosts struct {
	// Start is a job's first start or its resume after a preemption.
	Start time.Duration
	// Join and Leave are a grow and a shrink of a running job.
	Join, Leave time.Duration
}

// EDLCosts are edl's measured live-mode figures (`edl bench torch`,
// README): a PyTorch job's existing workers stall 0.15 s while one joins and
// 0.14 s while one leaves; a job's start, submission to its first step
// (`edl bench e2e`), takes 0.32 s.
var EDLCosts = ResizeCosts{Start: 321 * time.Millisecond, Join: 150 * time.Millisecond, Leave: 140 * time.Millisecond}

// Options is one run.
type Options struct {
	Policy      Policy
	GPUs        int
	GPUsPerNode int
	// Slot, when not zero, makes the policy decide only at multiples of it
	// (ElasticFlow's scheduling slot): arrivals wait for the next one,
	// GPUs a finished job frees idle until it. 0: at every arrival and
	// completion.
	Slot time.Duration
	// Costs is what a resize costs (zero: EDLCosts).
	Costs ResizeCosts
	// MaxFactor bounds the elastic policy: at most MaxFactor x the
	// request (0 means 2, as planner/sim).
	MaxFactor float64
	// AnySize lets the deadline policy run a job at any GPU count, the
	// speed between two table sizes on the straight line between them;
	// by default only the table's sizes (ElasticFlow's levels).
	AnySize bool
	// TiresiasThreshold is the tiresias policy's first queue bound, GPU
	// seconds (0 means 4 h, planner/sim's).
	TiresiasThreshold float64
}

// DefaultOptions is policy p on ElasticFlow's Figure 8(a) cluster: 64 GPUs,
// 4 per node.
func DefaultOptions(p Policy) Options {
	return Options{Policy: p, GPUs: 64, GPUsPerNode: 4, Costs: EDLCosts, MaxFactor: 2}
}

// Validate names the first bad field.
func (o Options) Validate() error {
	var errs []error
	switch o.Policy {
	case Deadline, EDF, Tiresias, Elastic:
	default:
		errs = append(errs, fmt.Errorf("policy %q: want one of deadline, edf, tiresias, elastic", o.Policy))
	}
	if o.GPUs < 1 {
		errs = append(errs, fmt.Errorf("gpus %d: must be positive", o.GPUs))
	}
	if o.GPUsPerNode < 1 {
		errs = append(errs, fmt.Errorf("gpus_per_node %d: must be positive", o.GPUsPerNode))
	}
	if o.Slot < 0 {
		errs = append(errs, fmt.Errorf("slot %s: must not be negative", o.Slot))
	}
	if o.Costs.Start < 0 || o.Costs.Join < 0 || o.Costs.Leave < 0 {
		errs = append(errs, errors.New("costs: must not be negative"))
	}
	if o.MaxFactor < 0 {
		errs = append(errs, fmt.Errorf("max_factor %g: must not be negative", o.MaxFactor))
	}
	return errors.Join(errs...)
}

func (o Options) costs() ResizeCosts {
	if o.Costs == (ResizeCosts{}) {
		return EDLCosts
	}
	return o.Costs
}

// Result is one run's figures.
type Result struct {
	Policy string `json:"policy"`
	Jobs   int    `json:"jobs"`
	GPUs   int    `json:"gpus"`
	// Met jobs finished by their deadline.
	Met int `json:"met"`
	// Refused strict jobs were not admitted (deadline policy only).
	Refused int `json:"refused"`
	// Late jobs ran and finished after their deadline.
	Late int `json:"late"`
	// AdmittedLate counts strict jobs the deadline policy admitted that
	// finished late: its guarantee says 0.
	AdmittedLate     int     `json:"admitted_late"`
	DeadlineMetRatio float64 `json:"deadline_met_ratio"`
	Resizes          int     `json:"resizes"`
	MakespanS        float64 `json:"makespan_s"`
	// Utilisation is GPU seconds held over GPUs x makespan.
	Utilisation float64 `json:"gpu_utilisation"`
	WallS       float64 `json:"wall_s"`
}
