package nomadx

import (
	"context"
	"sort"
	"strings"

	"github.com/edl-nomad/edl/jobs"
	"github.com/hashicorp/nomad/api"
)

// Capacity reads every node with its resources, every allocation (all
// namespaces) and edl's jobs: three requests, the round's view, which
// Workers and Scale then answer from. Nomad's node endpoints list GPU
// instances but not which are in use, so the DeviceIDs of allocations that
// hold them are subtracted: desired-run ones that have not finished.
// Stopping allocations (desired stop, the task still exiting) hold nothing:
// Nomad's scheduler has already given their devices away. Nodes that are
// down, ineligible or draining are left out (Nodes is empty, not null,
// when none is left). Each nvidia/gpu device group of a node is one
// jobs.Node (same ID); CPU slots for gpus_per_worker = 0 sit on the node's
// first entry. Workers StopWorker asked to leave and that exited get their
// slot released here (the count lowered by one). GPUs held by allocations
// of other Nomad jobs than edl's (not JobPrefix in Namespace: another
// team's jobs on a shared cluster) are counted in ForeignGPUs as well, so
// that the planner and deadline admission leave them out.
func (c *Cluster) Capacity(ctx context.Context) (jobs.Capacity, error) {
	v, err := c.refresh(ctx)
	if err != nil {
		return jobs.Capacity{}, err
	}
	c.finishLeaving(ctx, v)
	return capacityOf(v.nodes, v.allocs, c.cfg.CPUMHz, c.cfg.MemoryMiB, ownJobs{ns: c.ns(), prefix: c.cfg.JobPrefix}), nil
}

// ownJobs recognises edl's Nomad jobs: ID JobPrefix + edl job ID, in the
// configured namespace. Everything else is foreign.
type ownJobs struct {
	ns, prefix string
}

func (o ownJobs) has(a *api.AllocationListStub) bool {
	ns := a.Namespace
	if ns == "" {
		ns = "default"
	}
	return ns == o.ns && strings.HasPrefix(a.JobID, o.prefix)
}

type nodeUse struct {
	cpu, mem int64
	gpus     map[string]bool
	// foreign are the GPUs held by allocations of other jobs than edl's.
	foreign map[string]bool
}

// capacityOf is the pure part of Capacity.
func capacityOf(nodes []*api.NodeListStub, allocs []*api.AllocationListStub, cpuMHz, memMiB int, own ownJobs) jobs.Capacity {
	use := map[string]*nodeUse{}
	for _, a := range allocs {
		if a.DesiredStatus != "run" || terminal(a.ClientStatus) || a.AllocatedResources == nil {
			continue
		}
		u := use[a.NodeID]
		if u == nil {
			u = &nodeUse{gpus: map[string]bool{}, foreign: map[string]bool{}}
			use[a.NodeID] = u
		}
		for _, t := range a.AllocatedResources.Tasks {
			u.cpu += t.Cpu.CpuShares
			u.mem += t.Memory.MemoryMB
		}
		mine := own.has(a)
		for _, id := range gpuIDs(a.AllocatedResources) {
			u.gpus[id] = true
			if !mine {
				u.foreign[id] = true
			}
		}
	}
	out := jobs.Capacity{Nodes: []jobs.Node{}}
	for _, n := range nodes {
		if n.Status != "ready" || n.SchedulingEligibility != "eligible" || n.Drain || n.NodeResources == nil {
			continue
		}
		u := use[n.ID]
		if u == nil {
			u = &nodeUse{gpus: map[string]bool{}}
		}
		cpu, mem := n.NodeResources.Cpu.CpuShares, n.NodeResources.Memory.MemoryMB
		if r := n.ReservedResources; r != nil {
			cpu -= int64(r.Cpu.CpuShares)
			mem -= int64(r.Memory.MemoryMB)
		}
		slots := int(max(0, min(cpu/int64(cpuMHz), mem/int64(memMiB))))
		free := int(max(0, min((cpu-u.cpu)/int64(cpuMHz), (mem-u.mem)/int64(memMiB))))
		first := len(out.Nodes)
		for _, d := range n.NodeResources.Devices {
			if d.Vendor != "nvidia" || d.Type != "gpu" {
				continue
			}
			e := jobs.Node{ID: n.ID, Name: n.Name, Class: jobs.GPUClass{Model: d.Name, MemoryMiB: memoryMiB(d.Attributes["memory"])}}
			for _, inst := range d.Instances {
				if inst.Healthy {
					e.GPUs++
					if !u.gpus[inst.ID] {
						e.FreeGPUs++
					}
					if u.foreign[inst.ID] {
						e.ForeignGPUs++
					}
				}
			}
			out.Nodes = append(out.Nodes, e)
		}
		if len(out.Nodes) == first {
			out.Nodes = append(out.Nodes, jobs.Node{ID: n.ID, Name: n.Name})
		}
		out.Nodes[first].CPUSlots, out.Nodes[first].FreeCPUSlots = slots, free
	}
	sort.SliceStable(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	return out
}

// memoryMiB converts a device memory attribute (the NVIDIA plugin reports
// an integer in MiB) to MiB; 0 when absent or unknown.
func memoryMiB(a *api.Attribute) int {
	if a == nil {
		return 0
	}
	var v float64
	switch {
	case a.IntVal != nil:
		v = float64(*a.IntVal)
	case a.FloatVal != nil:
		v = *a.FloatVal
	default:
		return 0
	}
	mult := map[string]float64{"": 1, "MiB": 1, "GiB": 1024, "TiB": 1024 * 1024, "KiB": 1.0 / 1024,
		"B": 1.0 / (1 << 20), "KB": 1e3 / (1 << 20), "MB": 1e6 / (1 << 20), "GB": 1e9 / (1 << 20)}
	m, ok := mult[a.Unit]
	if !ok {
		return 0
	}
	return int(v * m)
}
