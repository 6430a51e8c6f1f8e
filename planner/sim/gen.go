package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/edl-nomad/edl/jobs"
)

// GenOptions sizes a synthetic trace (see Generate).
type GenOptions struct {
	Seed uint64
	Jobs int
	// GPUs is the cluster the trace is meant for: no request exceeds it,
	// and arrivals are spaced so that the GPU time asked per second is
	// OfferedLoad*GPUs at load 1.
	GPUs        int
	OfferedLoad float64
	// OpportunisticFrac is the share of jobs that only harvest idle GPUs.
	OpportunisticFrac float64
}

// DefaultGenOptions is the trace committed as
// testdata/traces/synthetic_mix_s1.csv.
func DefaultGenOptions() GenOptions {
	return GenOptions{Seed: 1, Jobs: 2000, GPUs: 64, OfferedLoad: 0.7, OpportunisticFrac: 0.1}
}

// Validate names the first bad field.
func (g GenOptions) Validate() error {
	var errs []error
	if g.Jobs < 1 {
		errs = append(errs, fmt.Errorf("jobs %d: must be positive", g.Jobs))
	}
	if g.GPUs < 1 {
		errs = append(errs, fmt.Errorf("gpus %d: must be positive", g.GPUs))
	}
	if !(g.OfferedLoad > 0) || math.IsInf(g.OfferedLoad, 0) {
		errs = append(errs, fmt.Errorf("offered_load %g: must be a positive number", g.OfferedLoad))
	}
	if !(g.OpportunisticFrac >= 0 && g.OpportunisticFrac <= 1) {
		errs = append(errs, fmt.Errorf("opportunistic %g: must be in [0, 1]", g.OpportunisticFrac))
	}
	return errors.Join(errs...)
}

// genTenants are the synthetic trace's virtual clusters, by share.
var genTenants = []struct {
	name  string
	share float64
}{{"vision", 0.4}, {"nlp", 0.3}, {"speech", 0.2}, {"rl", 0.1}}

// Generate draws a Helios/Pollux-like job mix (Hu et al., SC'21; Qiao et
// al., OSDI'21): most jobs are small and short, a few are huge and long,
// and about 40 % arrive in bursts (hyper-parameter sweeps of 8-32 one- or
// two-GPU trials submitted within five minutes). Per arrival:
//
//   - 3.5 %: a sweep of 8-32 trials, 1 GPU (2 GPUs in a fifth of
//     sweeps), each log-normal around 12 min (sigma 0.8);
//   - else a single job: GPUs 1 (55 %), 2 (12 %), 4 (15 %), 8 (11 %), 16
//     (4 %), 32 (2 %), 64 (1 %), capped at GPUs; run time log-normal with
//     median 20 min x (GPUs)^0.4 and sigma 1.7, from 1 min to 7 days;
//   - a single job is opportunistic with probability
//     OpportunisticFrac/0.6 (so that about OpportunisticFrac of all jobs
//     are): 2-8 GPUs, median 3 h, sigma 1.
//
// Arrivals are a Poisson process with a daily cycle (rate x (1 + 0.6
// sin)), scaled so that the trace asks OfferedLoad*GPUs GPU-seconds per
// second on average. The same options give the same trace.
func Generate(g GenOptions) []TraceJob {
	r := rand.New(rand.NewPCG(g.Seed, 0x5eed_ed1))
	lognormal := func(median, sigma, lo, hi float64) float64 {
		return math.Round(min(max(median*math.Exp(sigma*r.NormFloat64()), lo), hi))
	}
	tenant := func() string {
		u := r.Float64()
		for _, t := range genTenants {
			if u < t.share {
				return t.name
			}
			u -= t.share
		}
		return genTenants[len(genTenants)-1].name
	}
	type arrival struct {
		jobs []TraceJob
		gap  []float64 // seconds after the arrival, per job
	}
	var arrivals []arrival
	var gpuTime float64
	n := 0
	oppP := min(g.OpportunisticFrac/0.6, 1)
	sizes := []int{1, 2, 4, 8, 16, 32, 64}
	cum := []float64{0.55, 0.67, 0.82, 0.93, 0.97, 0.99, 1}
	for n < g.Jobs {
		var a arrival
		if r.Float64() < 0.035 {
			k := min(8+r.IntN(25), g.Jobs-n)
			gp := 1
			if r.IntN(5) == 0 {
				gp = 2
			}
			gp = min(gp, g.GPUs)
			ten := tenant()
			for range k {
				a.jobs = append(a.jobs, TraceJob{Tenant: ten, GPUs: gp, Duration: lognormal(720, 0.8, 60, 4*3600), Priority: jobs.Guaranteed})
				a.gap = append(a.gap, r.Float64()*300)
			}
		} else {
			j := TraceJob{Tenant: tenant(), Priority: jobs.Guaranteed}
			if r.Float64() < oppP {
				j.Priority = jobs.Opportunistic
				j.GPUs = min([]int{2, 4, 8}[r.IntN(3)], g.GPUs)
				j.Duration = lognormal(3*3600, 1, 600, 3*86400)
			} else {
				u, k := r.Float64(), 0
				for k < len(cum)-1 && u >= cum[k] {
					k++
				}
				j.GPUs = min(sizes[k], g.GPUs)
				j.Duration = lognormal(1200*math.Pow(float64(j.GPUs), 0.4), 1.7, 60, 7*86400)
			}
			a.jobs, a.gap = []TraceJob{j}, []float64{0}
		}
		for _, j := range a.jobs {
			gpuTime += float64(j.GPUs) * j.Duration
		}
		n += len(a.jobs)
		arrivals = append(arrivals, a)
	}
	// Mean gap between arrivals so that GPU time asked per second is
	// OfferedLoad*GPUs; a daily cycle thins the process (rate at time t is
	// proportional to 1 + 0.6 sin(2 pi t / day), mean 1).
	span := gpuTime / (g.OfferedLoad * float64(g.GPUs))
	mean := span / float64(len(arrivals))
	var out []TraceJob
	t := 0.0
	for _, a := range arrivals {
		for {
			t += r.ExpFloat64() * mean / 1.6
			if r.Float64()*1.6 < 1+0.6*math.Sin(2*math.Pi*t/86400) {
				break
			}
		}
		for k, j := range a.jobs {
			j.Submit = math.Round(t + a.gap[k])
			out = append(out, j)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Submit < out[b].Submit })
	base := out[0].Submit
	for i := range out {
		out[i].ID = fmt.Sprintf("syn-%05d", i+1)
		out[i].Submit -= base
	}
	return out
}

// WriteTraceCSV writes jobs in the form ReadTrace reads: job_id, submit_s,
// num_gpus, duration_s, gpu_time_s, vc, priority.
func WriteTraceCSV(w io.Writer, js []TraceJob) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"job_id", "submit_s", "num_gpus", "duration_s", "gpu_time_s", "vc", "priority"}); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, j := range js {
		p := j.Priority
		if p == "" {
			p = jobs.Guaranteed
		}
		if err := cw.Write([]string{j.ID, f(j.Submit), strconv.Itoa(j.GPUs), f(j.Duration), f(float64(j.GPUs) * j.Duration), j.Tenant, string(p)}); err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}
