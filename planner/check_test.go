package planner

import (
	"fmt"

	"github.com/edl-nomad/edl/jobs"
)

// checkPlan verifies the properties every plan must have and returns the
// first violation: one target per job in order; per node no more units than
// the node offers; placements only on matching nodes and summing to the
// target; bounds (a guaranteed job is at or above its minimum unless it is
// suspended); quotas; suspend flags; work conservation.
func checkPlan(s Snapshot, p Plan) error {
	if len(p.Targets) != len(s.Jobs) {
		return fmt.Errorf("%d targets for %d jobs", len(p.Targets), len(s.Jobs))
	}
	type avail struct {
		n     jobs.Node
		units [2]int
	}
	byID := map[string]*avail{}
	for _, n := range s.Capacity.Nodes {
		byID[n.ID] = &avail{n: n, units: [2]int{n.FreeGPUs, n.FreeCPUSlots}}
	}
	for _, j := range s.Jobs {
		r, u := resources(&j)
		for id, w := range j.Placement {
			byID[id].units[r] += w * u
		}
	}
	for _, a := range byID {
		// GPUs other Nomad jobs hold are not edl's, but what edl's own
		// workers hold there now stays theirs.
		a.units[resGPU] = min(a.units[resGPU], max(a.n.GPUs, a.n.FreeGPUs), max(a.n.UsableGPUs(), a.units[resGPU]-a.n.FreeGPUs))
		a.units[resCPU] = min(a.units[resCPU], max(a.n.CPUSlots, a.n.FreeCPUSlots))
	}
	used := map[string]int{}
	quota := map[string]int{}
	for _, t := range s.Tenants {
		quota[t.Name] = t.QuotaGPUs
	}
	for i, tg := range p.Targets {
		j := s.Jobs[i]
		if tg.JobID != j.ID {
			return fmt.Errorf("target %d is for %s, want %s", i, tg.JobID, j.ID)
		}
		lo, hi := pinBounds(j)
		if tg.Workers != 0 && (tg.Workers < lo || tg.Workers > hi) {
			return fmt.Errorf("job %s: %d workers outside [%d, %d]", j.ID, tg.Workers, lo, hi)
		}
		if tg.Suspend != (tg.Workers == 0 && j.Current > 0) {
			return fmt.Errorf("job %s: suspend=%v with %d -> %d workers", j.ID, tg.Suspend, j.Current, tg.Workers)
		}
		if tg.Reason == "" {
			return fmt.Errorf("job %s: no reason", j.ID)
		}
		r, u := resources(&j)
		sum := 0
		for id, w := range tg.Placement {
			a, ok := byID[id]
			if !ok {
				return fmt.Errorf("job %s placed on unknown node %s", j.ID, id)
			}
			if r == resGPU && !matches(a.n.Class, j.GPU) {
				return fmt.Errorf("job %s placed on node %s of class %+v against %+v", j.ID, id, a.n.Class, *j.GPU)
			}
			a.units[r] -= w * u
			if a.units[r] < 0 {
				return fmt.Errorf("node %s over-committed (resource %d) after job %s", id, r, j.ID)
			}
			sum += w
		}
		if sum != tg.Workers {
			return fmt.Errorf("job %s: placement sums to %d, target %d", j.ID, sum, tg.Workers)
		}
		if j.Priority != jobs.Opportunistic {
			used[j.Tenant] += tg.Workers * u
		}
	}
	for t, q := range quota {
		if q > 0 && used[t] > q {
			return fmt.Errorf("tenant %s holds %d, quota %d", t, used[t], q)
		}
	}
	// Work conservation: nobody below its maximum could take one more
	// worker (or, waiting, its whole minimum) on what is left.
	for i, tg := range p.Targets {
		j := s.Jobs[i]
		r, u := resources(&j)
		lo, hi := pinBounds(j)
		need := 1
		if tg.Workers == 0 {
			need = lo
		} else if tg.Workers >= hi {
			continue
		}
		if j.Priority != jobs.Opportunistic && quota[j.Tenant] > 0 && used[j.Tenant]+need*u > quota[j.Tenant] {
			continue
		}
		fit := 0
		for _, n := range s.Capacity.Nodes {
			a := byID[n.ID]
			if r == resGPU && !matches(a.n.Class, j.GPU) {
				continue
			}
			fit += a.units[r] / u
		}
		if fit >= need {
			return fmt.Errorf("not work-conserving: job %s at %d (max %d) could take %d more worker(s)", j.ID, tg.Workers, hi, need)
		}
	}
	return nil
}

// pinBounds are the sizes a job may get: Min..Max, or its pinned size
// (clamped to them), or, running below its pin, from its current size up
// to the pin (held until the pin fits).
func pinBounds(j JobState) (lo, hi int) {
	lo, hi = max(j.Min, 1), max(j.Max, j.Min, 1)
	if j.Pinned > 0 {
		lo = min(max(j.Pinned, lo), hi)
		hi = lo
		if j.Current > 0 && j.Current < lo {
			lo = j.Current
		}
	}
	return lo, hi
}
