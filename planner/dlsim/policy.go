package dlsim

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

func newPolicy(o Options) policy {
	switch o.Policy {
	case Deadline:
		return &deadlinePolicy{}
	case EDF:
		return edfPolicy{}
	default:
		return decidePolicy{}
	}
}

// deadlinePolicy is planner.Admit then planner.PlanDeadlines.
type deadlinePolicy struct{}

// plannerConfig tells the planner what a change costs: the longest stall,
// and with a slot the wait for the next decision (a job planned to grow
// when another finishes grows only at the next slot).
func (e *engine) plannerConfig() planner.Config {
	c := planner.DefaultConfig()
	c.ResizeCost = max(e.costs.Start, e.costs.Join, e.costs.Leave)
	c.DecisionLatency = e.o.Slot
	return c
}

// deadlineSnapshot is the active jobs as the planner sees them, on one
// node of all the GPUs (deadline planning looks at the total only).
func (e *engine) deadlineSnapshot() planner.Snapshot {
	s := planner.Snapshot{
		Capacity: jobs.Capacity{Nodes: []jobs.Node{{ID: "all", GPUs: e.o.GPUs, FreeGPUs: e.o.GPUs}}},
		Config:   e.plannerConfig(),
		Jobs:     make([]planner.JobState, 0, len(e.active)),
	}
	for _, r := range e.active {
		s.Jobs = append(s.Jobs, e.deadlineState(r))
	}
	return s
}

func (e *engine) deadlineState(r *run) planner.JobState {
	sizes := r.j.Sizes()
	js := planner.JobState{
		ID: r.j.ID, Min: 1, Max: sizes[len(sizes)-1], GPUsPerWorker: 1,
		Priority: jobs.Guaranteed, SubmittedAt: at(r.j.Submit), Current: r.workers,
		Throughput: r.j.Speed,
		Deadline: &planner.Deadline{
			At: at(r.j.Deadline), BestEffort: r.j.BestEffort,
			Remaining: r.j.Work - r.done, Share: r.share,
		},
	}
	if !e.o.AnySize {
		js.Deadline.Sizes = sizes
	} else {
		js.Max = min(e.o.GPUs, js.Max)
	}
	if r.workers > 0 {
		js.LastResize = at(r.lastResize)
	}
	return js
}

func (deadlinePolicy) arrive(e *engine, r *run) bool {
	a := planner.AdmitVerdict(e.deadlineSnapshot(), e.deadlineState(r), at(e.now))
	if !a.Admitted {
		return false
	}
	r.share = a.Workers
	r.admitted = !r.j.BestEffort
	return true
}

func (deadlinePolicy) decide(e *engine) []target {
	p := planner.PlanDeadlines(e.deadlineSnapshot(), at(e.now))
	ts := make([]target, len(e.active))
	for i, t := range p.Targets {
		ts[i].workers = t.Now
		e.active[i].share = t.Share
	}
	return ts
}

// edfPolicy runs jobs at their request in deadline order.
type edfPolicy struct{}

func (edfPolicy) arrive(*engine, *run) bool { return true }

func (edfPolicy) decide(e *engine) []target {
	order := make([]int, len(e.active))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := e.active[a], e.active[b]
		return cmp.Or(cmp.Compare(ra.j.Deadline, rb.j.Deadline), cmp.Compare(ra.j.Submit, rb.j.Submit))
	})
	ts := make([]target, len(e.active))
	free := e.o.GPUs
	for _, i := range order {
		if g := e.active[i].j.GPUs; g <= free {
			ts[i].workers = g
			free -= g
		}
	}
	return ts
}

// decidePolicy is planner.Decide, static (tiresias) or elastic.
type decidePolicy struct{}

func (decidePolicy) arrive(*engine, *run) bool { return true }

func (decidePolicy) decide(e *engine) []target {
	cfg := e.plannerConfig()
	if e.o.Policy == Tiresias {
		cfg.CompactThreshold = 0
		cfg.QueueThreshold, cfg.QueueLevels = e.o.TiresiasThreshold, 2
		if cfg.QueueThreshold == 0 {
			cfg.QueueThreshold = 4 * 3600
		}
	}
	nodes := (e.o.GPUs + e.o.GPUsPerNode - 1) / e.o.GPUsPerNode
	s := planner.Snapshot{Config: cfg, Jobs: make([]planner.JobState, len(e.active))}
	free := map[string]int{}
	for i := range nodes {
		id := fmt.Sprintf("node-%03d", i)
		g := min(e.o.GPUsPerNode, e.o.GPUs-i*e.o.GPUsPerNode)
		s.Capacity.Nodes = append(s.Capacity.Nodes, jobs.Node{ID: id, Class: jobs.GPUClass{Model: "sim"}, GPUs: g})
		free[id] = g
	}
	factor := e.o.MaxFactor
	if factor == 0 {
		factor = 2
	}
	for i, r := range e.active {
		for id, w := range r.placement {
			free[id] -= w
		}
		lo, hi := r.j.GPUs, r.j.GPUs
		if e.o.Policy == Elastic {
			sizes := r.j.Sizes()
			lo, hi = 1, max(r.j.GPUs, min(int(factor*float64(r.j.GPUs)+0.5), sizes[len(sizes)-1]))
		}
		s.Jobs[i] = planner.JobState{
			ID: r.j.ID, Tenant: "default", Min: lo, Max: hi, GPUsPerWorker: 1,
			Priority: jobs.Guaranteed, SubmittedAt: at(r.j.Submit),
			AttainedGPUSeconds: r.attained, Current: r.workers, Placement: r.placement,
			Throughput: r.measured,
		}
		if r.workers > 0 {
			s.Jobs[i].LastResize = at(r.lastResize)
		}
	}
	for k := range s.Capacity.Nodes {
		s.Capacity.Nodes[k].FreeGPUs = free[s.Capacity.Nodes[k].ID]
	}
	p := planner.Decide(s, at(e.now))
	ts := make([]target, len(e.active))
	for i, t := range p.Targets {
		ts[i] = target{workers: t.Workers, placement: t.Placement}
	}
	return ts
}
