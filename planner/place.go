package planner

import (
	"slices"

	"github.com/edl-nomad/edl/jobs"
)

// node is one node's capacity while a plan is built. Units are GPUs for GPU
// jobs and CPU slots for CPU-only ones.
type node struct {
	id    string
	class jobs.GPUClass
	cap   [2]int // [gpu, cpu] units the node has
	free  [2]int // [gpu, cpu] units not yet handed out in this plan
	// claim is what jobs currently placed here have not yet taken back in
	// this plan: other jobs avoid those units while there are others, so
	// that a re-plan moves as few workers as it can.
	claim [2]int
}

const (
	resGPU = 0
	resCPU = 1
)

// cluster is the capacity Decide hands out.
type cluster struct {
	nodes []node
	byID  map[string]int
	elig  map[eligKey][]int
	// noFit records, per kind of worker, the smallest gang that found no
	// room. Capacity only shrinks while a plan is built, so a larger gang of
	// the same kind cannot fit either and need not be tried: this keeps a
	// long queue of waiting jobs cheap.
	noFit map[eligKey]int
}

type eligKey struct {
	cpu   bool
	model string
	mem   int
	units int
}

// newCluster builds the capacity from the snapshot: each node's free units
// plus what the snapshot's own jobs hold there, at most the node's units
// less the GPUs foreign allocations hold (jobs.Node.UsableGPUs).
func newCluster(c jobs.Capacity, js []JobState) *cluster {
	cl := &cluster{byID: make(map[string]int, len(c.Nodes)), elig: map[eligKey][]int{}, noFit: map[eligKey]int{}}
	usable := map[string]int{}
	for _, n := range c.Nodes {
		if _, dup := cl.byID[n.ID]; dup {
			continue
		}
		if n.ForeignGPUs > 0 {
			usable[n.ID] = n.UsableGPUs()
		}
		cl.byID[n.ID] = len(cl.nodes)
		cl.nodes = append(cl.nodes, node{
			id: n.ID, class: n.Class,
			free: [2]int{max(n.FreeGPUs, 0), max(n.FreeCPUSlots, 0)},
			cap:  [2]int{max(n.GPUs, n.FreeGPUs, 0), max(n.CPUSlots, n.FreeCPUSlots, 0)},
		})
	}
	for i := range js {
		r, units := resources(&js[i])
		for id, w := range js[i].Placement {
			k, ok := cl.byID[id]
			if !ok || w <= 0 {
				continue
			}
			cl.nodes[k].free[r] += w * units
			cl.nodes[k].claim[r] += w * units
		}
	}
	// A node never offers more than it has, whatever the placements say,
	// nor GPUs that other Nomad jobs hold (ForeignGPUs): a worker planned
	// there would wait in a blocked evaluation while the plan counted it.
	// What the snapshot's own jobs hold there now is never cut by that
	// (the cluster's capacity and its workers may come from reads a moment
	// apart).
	for k := range cl.nodes {
		n := &cl.nodes[k]
		limit := n.cap
		if u, ok := usable[n.id]; ok {
			limit[resGPU] = min(limit[resGPU], max(u, n.claim[resGPU]))
		}
		for r := range n.free {
			n.free[r] = min(n.free[r], limit[r])
			n.claim[r] = min(n.claim[r], n.free[r])
		}
	}
	return cl
}

// resources is the resource a job's workers use and how many units each.
func resources(j *JobState) (res, units int) {
	if j.GPUsPerWorker <= 0 {
		return resCPU, 1
	}
	return resGPU, j.GPUsPerWorker
}

// matches reports whether a GPU class satisfies a job's constraint.
func matches(c jobs.GPUClass, g *jobs.GPUConstraint) bool {
	if g == nil {
		return true
	}
	if g.Model != "" && g.Model != c.Model {
		return false
	}
	return c.MemoryMiB >= g.MinMemoryMiB
}

// eligible lists the nodes that could ever hold one worker of j, in node
// order. Lists are shared between jobs with the same needs.
func (cl *cluster) eligible(j *JobState) ([]int, eligKey) {
	res, units := resources(j)
	k := eligKey{cpu: res == resCPU, units: units}
	if res == resGPU && j.GPU != nil {
		k.model, k.mem = j.GPU.Model, j.GPU.MinMemoryMiB
	}
	if l, ok := cl.elig[k]; ok {
		return l, k
	}
	var l []int
	for i, n := range cl.nodes {
		if n.cap[res] < units {
			continue
		}
		if res == resGPU && !matches(n.class, j.GPU) {
			continue
		}
		l = append(l, i)
	}
	cl.elig[k] = l
	return l, k
}

// mayFit reports whether a gang of n workers of this kind might still fit.
func (cl *cluster) mayFit(k eligKey, n int) bool {
	f, ok := cl.noFit[k]
	return !ok || n < f
}

// noRoom records that a gang of n workers of this kind did not fit.
func (cl *cluster) noRoom(k eligKey, n int) {
	if f, ok := cl.noFit[k]; !ok || n < f {
		cl.noFit[k] = n
	}
}

// slot is one worker placed in the plan being built.
type slot struct {
	node int
	own  bool // taken back from the job's own current placement
}

// placeOne puts one more worker of p on a node: first where the job runs
// now, then best fit among units nobody holds, then best fit anywhere. It
// returns false when no node has room.
func (cl *cluster) placeOne(p *jobPlan) bool {
	r, u := p.res, p.units
	for i := range p.own {
		o := &p.own[i]
		if o.left > 0 && cl.nodes[o.node].free[r] >= u {
			o.left--
			cl.nodes[o.node].free[r] -= u
			cl.nodes[o.node].claim[r] = max(cl.nodes[o.node].claim[r]-u, 0)
			p.slots = append(p.slots, slot{node: o.node, own: true})
			return true
		}
	}
	best, bestLeft := -1, 0
	for _, k := range p.elig {
		n := &cl.nodes[k]
		if left := n.free[r] - n.claim[r] - u; left >= 0 && (best < 0 || left < bestLeft) {
			best, bestLeft = k, left
		}
	}
	if best < 0 {
		for _, k := range p.elig {
			n := &cl.nodes[k]
			if left := n.free[r] - u; left >= 0 && (best < 0 || left < bestLeft) {
				best, bestLeft = k, left
			}
		}
	}
	if best < 0 {
		return false
	}
	cl.nodes[best].free[r] -= u
	p.slots = append(p.slots, slot{node: best})
	return true
}

// unplaceLast undoes the newest placeOne of p.
func (cl *cluster) unplaceLast(p *jobPlan) {
	s := p.slots[len(p.slots)-1]
	p.slots = p.slots[:len(p.slots)-1]
	cl.nodes[s.node].free[p.res] += p.units
	if s.own {
		for i := range p.own {
			if p.own[i].node == s.node {
				p.own[i].left++
				cl.nodes[s.node].claim[p.res] += p.units
				break
			}
		}
	}
}

// ownSlots turns a current placement into the job's own-node list, in node
// order.
func (cl *cluster) ownSlots(j *JobState) []ownSlot {
	var o []ownSlot
	for id, w := range j.Placement {
		if k, ok := cl.byID[id]; ok && w > 0 {
			o = append(o, ownSlot{node: k, left: w})
		}
	}
	slices.SortFunc(o, func(a, b ownSlot) int { return a.node - b.node })
	return o
}

type ownSlot struct{ node, left int }

// placement is the plan's node -> workers map for p.
func (cl *cluster) placement(p *jobPlan) map[string]int {
	if len(p.slots) == 0 {
		return nil
	}
	m := make(map[string]int, 2)
	for _, s := range p.slots {
		m[cl.nodes[s.node].id]++
	}
	return m
}
