package planner

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// decideDeadlines is Decide's first step when the snapshot has deadline
// jobs: PlanDeadlines gives each its share now, which is placed on the
// nodes before anything else (where the job runs now first, then the
// fullest nodes that still fit a worker); the rest of the policy then runs
// on the other jobs and what is left, as if the deadline jobs' GPUs were
// someone else's. So a deadline job never loses its planned share to a job
// without a deadline, whatever its priority, quota or attained service.
// ok is false when there are no deadline jobs.
func decideDeadlines(s Snapshot, now time.Time) (p Plan, ok bool) {
	var dl, rest []int
	for i := range s.Jobs {
		if s.Jobs[i].Deadline != nil {
			dl = append(dl, i)
		} else {
			rest = append(rest, i)
		}
	}
	if len(dl) == 0 {
		return Plan{}, false
	}
	dp := PlanDeadlines(s, now)
	cl := newCluster(s.Capacity, s.Jobs)
	// Earliest deadline places first, so that fragmentation hurts the
	// later ones.
	order := slices.Clone(dl)
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(s.Jobs[a].Deadline.At.UnixNano(), s.Jobs[b].Deadline.At.UnixNano())
	})
	byJob := map[int]Target{}
	for k, i := range dl {
		byJob[i] = Target{JobID: s.Jobs[i].ID, Reason: "deadline: " + dp.Targets[k].Reason, Deadline: &dp.Targets[k]}
	}
	for _, i := range order {
		j := &s.Jobs[i]
		k := slices.Index(dl, i)
		jp := &jobPlan{j: j, min: 1, max: max(j.Max, 1)}
		jp.res, jp.units = resources(j)
		jp.elig, jp.kind = cl.eligible(j)
		jp.own = cl.ownSlots(j)
		for range dp.Targets[k].Now {
			if !cl.placeOne(jp) {
				break
			}
		}
		t := byJob[i]
		t.Workers, t.Placement = jp.workers(), cl.placement(jp)
		t.Suspend = t.Workers == 0 && j.Current > 0
		if t.Workers < dp.Targets[k].Now {
			t.Reason += fmt.Sprintf("; only %d of %d workers fit on the nodes", t.Workers, dp.Targets[k].Now)
		}
		byJob[i] = t
	}
	inner := Snapshot{Tenants: s.Tenants, Config: s.Config}
	inner.Capacity.Nodes = slices.Clone(s.Capacity.Nodes)
	for _, i := range rest {
		inner.Jobs = append(inner.Jobs, s.Jobs[i])
	}
	// What the other jobs may use on a node is what newCluster offered
	// less the deadline jobs' workers: set each node's free units to that
	// minus what the other jobs hold there, and where that is negative
	// take their workers off the node (they are moved or shrunk).
	for k := range inner.Capacity.Nodes {
		n := &inner.Capacity.Nodes[k]
		c := cl.nodes[cl.byID[n.ID]]
		for r := range 2 {
			left := c.free[r]
			for ji := range inner.Jobs {
				j := &inner.Jobs[ji]
				jr, u := resources(j)
				if jr != r || j.Placement[n.ID] <= 0 {
					continue
				}
				held := j.Placement[n.ID] * u
				if held > left {
					j.Placement = maps.Clone(j.Placement)
					j.Placement[n.ID] = left / u
					held = j.Placement[n.ID] * u
				}
				left -= held
			}
			if r == resGPU {
				n.FreeGPUs = left
			} else {
				n.FreeCPUSlots = left
			}
		}
	}
	ip := Decide(inner, now)
	p = Plan{Targets: make([]Target, len(s.Jobs)), Waiting: ip.Waiting, Compacted: ip.Compacted, Recheck: ip.Recheck}
	for k, i := range rest {
		p.Targets[i] = ip.Targets[k]
	}
	for _, i := range dl {
		p.Targets[i] = byJob[i]
		if byJob[i].Workers == 0 {
			p.Waiting++
		}
	}
	return p, true
}
