package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/google/go-cmp/cmp"
)

var classes = []jobs.GPUClass{v100, a100, {Model: "T4", MemoryMiB: 15360}}

// randomSnapshot builds a consistent random cluster: nodes of mixed classes,
// some capacity held by foreign work, jobs of both priorities, some running
// (their placement taken out of the nodes' free counts), tenants with and
// without quotas, and sometimes a non-default config.
func randomSnapshot(r *rand.Rand, nJobs int) Snapshot {
	var s Snapshot
	nn := 1 + r.IntN(12)
	for i := range nn {
		g := []int{1, 2, 4, 8}[r.IntN(4)]
		n := jobs.Node{ID: fmt.Sprintf("n%02d", i), Class: classes[r.IntN(len(classes))], GPUs: g, CPUSlots: r.IntN(5)}
		n.FreeGPUs = g - r.IntN(2)*r.IntN(g+1) // foreign work holds some
		n.ForeignGPUs = g - n.FreeGPUs
		n.FreeCPUSlots = n.CPUSlots
		s.Capacity.Nodes = append(s.Capacity.Nodes, n)
	}
	tenants := []string{"a", "b", "c"}
	for _, t := range tenants {
		if r.IntN(2) == 0 {
			s.Tenants = append(s.Tenants, TenantShare{Name: t, QuotaGPUs: r.IntN(20), Weight: float64(r.IntN(4))})
		}
	}
	for i := range nJobs {
		mn := 1 + r.IntN(3)
		j := JobState{
			ID: fmt.Sprintf("j%03d", i), Tenant: tenants[r.IntN(len(tenants))],
			Min: mn, Max: mn + r.IntN(8), GPUsPerWorker: []int{0, 1, 1, 1, 2, 4}[r.IntN(6)],
			Priority:           []jobs.Priority{jobs.Guaranteed, jobs.Guaranteed, jobs.Opportunistic}[r.IntN(3)],
			SubmittedAt:        t0.Add(-time.Duration(r.IntN(1000)) * time.Second),
			AttainedGPUSeconds: float64(r.IntN(3)) * 3000,
		}
		if r.IntN(4) == 0 {
			c := classes[r.IntN(len(classes))]
			j.GPU = &jobs.GPUConstraint{Model: c.Model}
			if r.IntN(2) == 0 {
				j.GPU = &jobs.GPUConstraint{MinMemoryMiB: 20000}
			}
		}
		if r.IntN(6) == 0 {
			j.Pinned = 1 + r.IntN(j.Max+1)
		}
		if r.IntN(3) == 0 {
			j.Throughput = map[int]float64{1: 10, 2: 10 + r.Float64()*10, 4: 15 + r.Float64()*25}
		}
		if r.IntN(3) == 0 {
			j.LastResize = t0.Add(-time.Duration(r.IntN(300)) * time.Second)
		}
		s.Jobs = append(s.Jobs, j)
		// Some jobs run now: place up to Max workers where they fit.
		if r.IntN(2) == 0 {
			res, u := resources(&j)
			want := 1 + r.IntN(j.Max)
			place := map[string]int{}
			for k := range s.Capacity.Nodes {
				n := &s.Capacity.Nodes[k]
				if res == resGPU && !matches(n.Class, j.GPU) {
					continue
				}
				free := &n.FreeGPUs
				if res == resCPU {
					free = &n.FreeCPUSlots
				}
				for want > 0 && *free >= u {
					*free -= u
					place[n.ID]++
					want--
					s.Jobs[i].Current++
				}
			}
			if len(place) > 0 {
				s.Jobs[i].Placement = place
			}
		}
	}
	if r.IntN(3) == 0 {
		s.Config = DefaultConfig()
		s.Config.CompactThreshold = r.IntN(3)
		s.Config.ResizeCost = time.Duration(r.IntN(60)) * time.Second
		s.Config.QueueThreshold = []float64{-1, 3600}[r.IntN(2)]
		s.Config.QueueLevels = []int{0, 2, 8}[r.IntN(3)]
		s.Config.HarvestFirst = r.IntN(2) == 0
		s.Config.QueueThresholdPerGPU = []float64{0, 3600.0 / 128, 600}[r.IntN(3)]
		s.Config.GittinsThreshold = []float64{0, 60, 3600}[r.IntN(3)]
	}
	if r.IntN(2) == 0 { // a history of finished jobs: Gittins ranking
		served := make([]float64, MinServiceHistory+r.IntN(40))
		for k := range served {
			served[k] = 60 * math.Pow(10, 4*r.Float64())
		}
		h, err := NewServiceHistory(served, nil)
		if err != nil {
			panic(err)
		}
		s.Service = h
	}
	return s
}

func TestDecidePropertiesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 7))
	for i := range 800 {
		s := randomSnapshot(r, 1+r.IntN(30))
		p := Decide(s, t0)
		if err := checkPlan(s, p); err != nil {
			t.Fatalf("case %d: %v\nsnapshot: %+v\nplan: %+v", i, err, s, p)
		}
	}
}

func TestDecideDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for i := range 200 {
		s := randomSnapshot(r, 1+r.IntN(40))
		first := Decide(s, t0)
		if diff := cmp.Diff(first, Decide(s, t0)); diff != "" {
			t.Fatalf("case %d: second Decide differs (-first +second):\n%s", i, diff)
		}
		// The jobs' order in the snapshot does not change any job's target.
		shuffled := s
		shuffled.Jobs = append([]JobState(nil), s.Jobs...)
		r.Shuffle(len(shuffled.Jobs), func(a, b int) { shuffled.Jobs[a], shuffled.Jobs[b] = shuffled.Jobs[b], shuffled.Jobs[a] })
		again := Decide(shuffled, t0)
		for _, tg := range first.Targets {
			other, _ := again.Target(tg.JobID)
			if diff := cmp.Diff(tg, other); diff != "" {
				t.Fatalf("case %d: job %s differs when jobs are reordered (-first +reordered):\n%s", i, tg.JobID, diff)
			}
		}
	}
}

// A guaranteed job is never cut below its minimum to grow somebody else:
// once every guaranteed job that runs now fits at its minimum together with
// the rest, none of them is suspended.
func TestDecideNoSuspensionWithoutHigherClaim(t *testing.T) {
	s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 2, 8, v100)}}
	for i := range 8 {
		s.Jobs = append(s.Jobs, job(fmt.Sprintf("j%d", i), 2, 8, submitted(time.Duration(i)*time.Second), attained(float64(i)*2000)))
	}
	for i := range 4 {
		running(&s, fmt.Sprintf("j%d", i), map[string]int{fmt.Sprintf("n-%d", i/2): 4})
	}
	p := Decide(s, t0)
	if err := checkPlan(s, p); err != nil {
		t.Fatal(err)
	}
	for _, tg := range p.Targets {
		if tg.Workers < 2 {
			t.Errorf("%s: %d workers (%s); all eight minimums fit in 16 GPUs", tg.JobID, tg.Workers, tg.Reason)
		}
	}
}
