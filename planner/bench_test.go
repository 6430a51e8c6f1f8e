package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// benchSnapshot is a 1,000-GPU cluster (125 nodes of 8, two classes) with
// nJobs live jobs, about half running where they fit.
func benchSnapshot(nJobs int) Snapshot {
	r := rand.New(rand.NewPCG(42, uint64(nJobs)))
	var s Snapshot
	for i := range 125 {
		c := v100
		if i%5 == 0 {
			c = a100
		}
		s.Capacity.Nodes = append(s.Capacity.Nodes, jobs.Node{ID: fmt.Sprintf("n%03d", i), Class: c,
			GPUs: 8, FreeGPUs: 8, CPUSlots: 8, FreeCPUSlots: 8})
	}
	for i := range 10 {
		s.Tenants = append(s.Tenants, TenantShare{Name: fmt.Sprintf("t%d", i), QuotaGPUs: 200, Weight: 1})
	}
	next := 0
	for i := range nJobs {
		mn := 1 + r.IntN(2)
		j := JobState{ID: fmt.Sprintf("job-%05d", i), Tenant: fmt.Sprintf("t%d", r.IntN(11)),
			Min: mn, Max: mn * (1 + r.IntN(4)), GPUsPerWorker: []int{1, 1, 2, 4}[r.IntN(4)],
			Priority:           []jobs.Priority{jobs.Guaranteed, jobs.Guaranteed, jobs.Opportunistic}[r.IntN(3)],
			SubmittedAt:        t0.Add(-time.Duration(r.IntN(86400)) * time.Second),
			AttainedGPUSeconds: r.Float64() * 7200}
		if r.IntN(2) == 0 {
			j.Throughput = map[int]float64{mn: 100, mn + 1: 100 + r.Float64()*90}
		}
		if r.IntN(8) == 0 {
			j.GPU = &jobs.GPUConstraint{Model: "A100"}
		}
		// Run it on the next nodes with room, if any.
		if r.IntN(2) == 0 && j.GPU == nil {
			for k := next; k < len(s.Capacity.Nodes) && j.Current < j.Min; k++ {
				n := &s.Capacity.Nodes[k]
				for n.FreeGPUs >= j.GPUsPerWorker && j.Current < j.Min {
					n.FreeGPUs -= j.GPUsPerWorker
					if j.Placement == nil {
						j.Placement = map[string]int{}
					}
					j.Placement[n.ID]++
					j.Current++
				}
				if n.FreeGPUs == 0 {
					next = k + 1
				}
			}
			if j.Current < j.Min { // did not fit: leave it waiting
				for id, w := range j.Placement {
					for k := range s.Capacity.Nodes {
						if s.Capacity.Nodes[k].ID == id {
							s.Capacity.Nodes[k].FreeGPUs += w * j.GPUsPerWorker
						}
					}
				}
				j.Current, j.Placement = 0, nil
			}
		}
		s.Jobs = append(s.Jobs, j)
	}
	return s
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		s := benchSnapshot(n)
		b.Run(fmt.Sprintf("jobs=%d/gpus=1000", n), func(b *testing.B) {
			var p Plan
			for b.Loop() {
				p = Decide(s, t0)
			}
			b.ReportMetric(float64(p.Waiting), "waiting")
		})
	}
	// With a history of 10,000 finished jobs: ranked by its Gittins index
	// (the history is built once, outside Decide, as the simulator does).
	s := benchSnapshot(10000)
	s.Service = benchHistory(10000)
	b.Run("jobs=10000/gpus=1000/gittins", func(b *testing.B) {
		for b.Loop() {
			Decide(s, t0)
		}
	})
	b.Run("history=10000", func(b *testing.B) {
		for b.Loop() {
			benchHistory(10000)
		}
	})
}

// benchHistory is n finished jobs, log-uniform from a minute to a month of
// GPU time.
func benchHistory(n int) *ServiceHistory {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	served := make([]float64, n)
	for i := range served {
		served[i] = 60 * math.Pow(10, 4.6*r.Float64())
	}
	h, err := NewServiceHistory(served, nil)
	if err != nil {
		panic(err)
	}
	return h
}

// The benchmark's snapshots are themselves valid inputs with valid plans.
func TestBenchSnapshotPlans(t *testing.T) {
	for _, n := range []int{100, 1000} {
		s := benchSnapshot(n)
		if err := checkPlan(s, Decide(s, t0)); err != nil {
			t.Errorf("%d jobs: %v", n, err)
		}
	}
}
