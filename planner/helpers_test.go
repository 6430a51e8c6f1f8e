package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	v100 = jobs.GPUClass{Model: "V100", MemoryMiB: 16384}
	a100 = jobs.GPUClass{Model: "A100", MemoryMiB: 81920}
)

// nodes returns n empty nodes of class c with gpus GPUs and 4 CPU slots each,
// named prefix-0, prefix-1, ...
func nodes(prefix string, n, gpus int, c jobs.GPUClass) []jobs.Node {
	out := make([]jobs.Node, n)
	for i := range out {
		out[i] = jobs.Node{ID: fmt.Sprintf("%s-%d", prefix, i), Name: fmt.Sprintf("%s-%d", prefix, i), Class: c,
			GPUs: gpus, FreeGPUs: gpus, CPUSlots: 4, FreeCPUSlots: 4}
	}
	return out
}

// job builds a guaranteed 1-GPU-per-worker job; opts adjust it.
func job(id string, minW, maxW int, opts ...func(*JobState)) JobState {
	j := JobState{ID: id, Tenant: "t", Min: minW, Max: maxW, GPUsPerWorker: 1,
		Priority: jobs.Guaranteed, SubmittedAt: t0}
	for _, o := range opts {
		o(&j)
	}
	return j
}

func tenantOf(t string) func(*JobState)  { return func(j *JobState) { j.Tenant = t } }
func gpw(n int) func(*JobState)          { return func(j *JobState) { j.GPUsPerWorker = n } }
func opportunistic() func(*JobState)     { return func(j *JobState) { j.Priority = jobs.Opportunistic } }
func attained(s float64) func(*JobState) { return func(j *JobState) { j.AttainedGPUSeconds = s } }
func submitted(d time.Duration) func(*JobState) {
	return func(j *JobState) { j.SubmittedAt = t0.Add(d) }
}
func pinned(n int) func(*JobState) { return func(j *JobState) { j.Pinned = n } }
func constraint(model string, mem int) func(*JobState) {
	return func(j *JobState) { j.GPU = &jobs.GPUConstraint{Model: model, MinMemoryMiB: mem} }
}
func throughput(m map[int]float64) func(*JobState) { return func(j *JobState) { j.Throughput = m } }
func resized(ago time.Duration) func(*JobState) {
	return func(j *JobState) { j.LastResize = t0.Add(-ago) }
}

// running marks the job as holding workers on the given nodes and takes
// those GPUs out of the nodes' free counts.
func running(s *Snapshot, id string, place map[string]int) {
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.ID != id {
			continue
		}
		j.Placement = place
		j.Current = 0
		for nid, w := range place {
			j.Current += w
			for k := range s.Capacity.Nodes {
				n := &s.Capacity.Nodes[k]
				if n.ID == nid {
					if j.GPUsPerWorker > 0 {
						n.FreeGPUs -= w * j.GPUsPerWorker
					} else {
						n.FreeCPUSlots -= w
					}
				}
			}
		}
		return
	}
	panic("running: no job " + id)
}

func workersOf(t *testing.T, p Plan, id string) int {
	t.Helper()
	tg, ok := p.Target(id)
	if !ok {
		t.Fatalf("plan has no target for %s", id)
	}
	return tg.Workers
}
