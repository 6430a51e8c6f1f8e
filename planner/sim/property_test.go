package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// oddTrace draws a trace unlike the Philly fixture: heavy-tailed (Pareto)
// durations, mostly tiny 1-GPU jobs, bursts of identical arrivals at one
// instant, a few jobs asking for the whole cluster or more than a node,
// many tenants and some opportunistic jobs.
func oddTrace(r *rand.Rand, n, gpus, perNode int) []TraceJob {
	var out []TraceJob
	t := 0.0
	for i := 0; len(out) < n; i++ {
		tenant := fmt.Sprintf("vc%02d", r.IntN(25))
		prio := jobs.Guaranteed
		if r.IntN(6) == 0 {
			prio = jobs.Opportunistic
		}
		if r.IntN(15) == 0 { // a burst: many jobs at the same second
			for k := range 5 + r.IntN(30) {
				out = append(out, TraceJob{ID: fmt.Sprintf("b%d-%d", i, k), Tenant: tenant, Submit: t, GPUs: 1, Duration: 1 + float64(r.IntN(120)), Priority: prio})
			}
		}
		g := 1
		switch x := r.IntN(20); {
		case x == 0:
			g = gpus // the whole cluster
		case x == 1:
			g = min(gpus, perNode+1+r.IntN(perNode+1)) // more than a node
		case x < 5:
			g = 1 + r.IntN(min(gpus, 2*perNode))
		}
		d := min(0.5*math.Pow(1-r.Float64(), -1/1.1)*60, 5e6) // Pareto, alpha 1.1
		if r.IntN(10) == 0 {
			d = 0.001 + r.Float64()*0.01 // tinier than a resize
		}
		out = append(out, TraceJob{ID: fmt.Sprintf("j%d", i), Tenant: tenant, Submit: t, GPUs: g, Duration: d, Priority: prio})
		if r.IntN(4) != 0 {
			t += r.ExpFloat64() * 120
		}
	}
	return out
}

// checkDecision verifies one round of the engine: no node holds more
// workers than it has GPUs, every job that runs is within its bounds and
// placed where its workers are counted, and every job gets a target.
func checkDecision(s planner.Snapshot, p planner.Plan, bounds func(string) (int, int)) error {
	if len(p.Targets) != len(s.Jobs) {
		return fmt.Errorf("%d targets for %d jobs", len(p.Targets), len(s.Jobs))
	}
	gpus := map[string]int{}
	for _, n := range s.Capacity.Nodes {
		gpus[n.ID] = n.GPUs
	}
	held := map[string]int{}
	for i, tg := range p.Targets {
		j := s.Jobs[i]
		lo, hi := bounds(j.ID)
		if j.Pinned > 0 {
			lo = min(j.Pinned, lo)
		}
		if tg.Workers != 0 && (tg.Workers < lo || tg.Workers > hi) {
			return fmt.Errorf("job %s: %d workers outside [%d, %d]", j.ID, tg.Workers, lo, hi)
		}
		sum := 0
		for id, w := range tg.Placement {
			if _, ok := gpus[id]; !ok || w < 0 {
				return fmt.Errorf("job %s: %d workers on node %q", j.ID, w, id)
			}
			held[id] += w
			sum += w
		}
		if sum != tg.Workers {
			return fmt.Errorf("job %s: placement sums to %d, target %d", j.ID, sum, tg.Workers)
		}
	}
	for id, h := range held {
		if h > gpus[id] {
			return fmt.Errorf("node %s: %d workers on %d GPUs", id, h, gpus[id])
		}
	}
	return nil
}

// checkResult verifies the figures of a finished run.
func checkResult(trace []TraceJob, r Result) error {
	if r.Jobs != len(trace) || len(r.JCTs) != len(trace) {
		return fmt.Errorf("%d jobs, %d JCTs for a trace of %d", r.Jobs, len(r.JCTs), len(trace))
	}
	for _, v := range []struct {
		name string
		x    float64
	}{{"avg_jct", r.AvgJCT}, {"ideal", r.IdealAvgJCT}, {"p50", r.P50JCT}, {"p95", r.P95JCT}, {"p99", r.P99JCT},
		{"makespan", r.Makespan}, {"avg_queue", r.AvgQueue}, {"gpu_util", r.GPUUtil}, {"resizes/job", r.ResizesPerJob},
		{"opp_jct", r.OppAvgJCT}, {"guar_jct", r.GuarAvgJCT}, {"giveback_s", r.GivebackS}} {
		if !(v.x >= 0) || math.IsInf(v.x, 0) {
			return fmt.Errorf("%s = %g: want a finite non-negative number", v.name, v.x)
		}
	}
	if r.GPUUtil > 1+1e-9 {
		return fmt.Errorf("gpu_util %g above 1", r.GPUUtil)
	}
	if r.JCTs[0] <= 0 {
		return fmt.Errorf("shortest JCT %g: every job takes time", r.JCTs[0])
	}
	if !(r.P50JCT <= r.P95JCT && r.P95JCT <= r.P99JCT && r.P99JCT <= r.JCTs[len(r.JCTs)-1]) {
		return fmt.Errorf("percentiles out of order: p50 %g, p95 %g, p99 %g, max %g", r.P50JCT, r.P95JCT, r.P99JCT, r.JCTs[len(r.JCTs)-1])
	}
	if r.AvgJCT < r.IdealAvgJCT*(1-1e-9) {
		return fmt.Errorf("avg JCT %g below the ideal %g", r.AvgJCT, r.IdealAvgJCT)
	}
	if r.AvgQueue > r.AvgJCT {
		return fmt.Errorf("avg queue %g above avg JCT %g", r.AvgQueue, r.AvgJCT)
	}
	return nil
}

// Every policy, on traces unlike the fixtures and clusters with odd node
// sizes, finishes every job, never over-commits a node or sizes a job
// outside its bounds, reports sane figures and is deterministic.
func TestRunPropertiesOddTraces(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 23))
	for c := range 12 {
		perNode := []int{1, 3, 4, 5, 8, 8, 12}[r.IntN(7)]
		gpus := perNode*(1+r.IntN(6)) + r.IntN(perNode) // a last, smaller node
		trace := oddTrace(r, 60+r.IntN(200), gpus, perNode)
		for _, pol := range Policies {
			o := DefaultOptions(pol)
			o.GPUs, o.GPUsPerNode = gpus, perNode
			o.Backfill = r.IntN(2) == 0
			o.MinFactor = []float64{0, 0.5, 1}[r.IntN(3)]
			o.MaxFactor = max(o.MinFactor, []float64{1, 2, 4}[r.IntN(3)])
			if r.IntN(3) == 0 {
				o.FailuresPerGPUDay = 20
			}
			if r.IntN(3) == 0 {
				o.Load = []float64{0.5, 2, 8}[r.IntN(3)]
			}
			name := fmt.Sprintf("case %d %s on %d GPUs (%d per node), %d jobs", c, pol, gpus, perNode, len(trace))
			byID := map[string]int{}
			for _, j := range trace {
				byID[j.ID] = j.GPUs
			}
			var bad error
			decideHook = func(s planner.Snapshot, p planner.Plan) {
				if bad == nil {
					bad = checkDecision(s, p, func(id string) (int, int) { return o.bounds(byID[id]) })
				}
			}
			res, err := Run(context.Background(), trace, o)
			decideHook = nil
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if bad != nil {
				t.Fatalf("%s: %v", name, bad)
			}
			if err := checkResult(trace, res); err != nil {
				t.Fatalf("%s: %v\n%+v", name, err, res)
			}
			again, err := Run(context.Background(), trace, o)
			if err != nil {
				t.Fatal(err)
			}
			res.WallS, again.WallS = 0, 0
			if !reflect.DeepEqual(res, again) {
				t.Fatalf("%s: a second run differs:\n%+v\n%+v", name, res, again)
			}
		}
	}
}
