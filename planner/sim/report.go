package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/edl-nomad/edl/jobs"
)

// Result is one simulation's figures; the JSON names are what `edl sim
// --json` prints.
type Result struct {
	Policy Policy  `json:"policy"`
	Load   float64 `json:"load"`
	GPUs   int     `json:"gpus"`
	Jobs   int     `json:"jobs"`
	AvgJCT float64 `json:"avg_jct_s"`
	// IdealAvgJCT is the average JCT if every job ran alone at its
	// maximum size from its submission (no queueing, no resize costs): a
	// lower bound for the policy's bounds (for static policies, the
	// trace's average duration).
	IdealAvgJCT float64 `json:"ideal_avg_jct_s"`
	P50JCT      float64 `json:"p50_jct_s"`
	P95JCT      float64 `json:"p95_jct_s"`
	P99JCT      float64 `json:"p99_jct_s"`
	Makespan    float64 `json:"makespan_s"`
	AvgQueue    float64 `json:"avg_queue_s"`
	// GPUUtil is the GPU time held over the cluster's GPU time from the
	// first arrival to the last end, the sweeps' trials' included.
	GPUUtil       float64 `json:"gpu_util"`
	Resizes       int     `json:"resizes"`
	ResizesPerJob float64 `json:"resizes_per_job"`
	// OppJobs counts the opportunistic jobs and OppAvgJCT is their average
	// completion time; the guaranteed jobs' is GuarAvgJCT.
	OppJobs    int     `json:"opportunistic_jobs"`
	OppAvgJCT  float64 `json:"opportunistic_avg_jct_s"`
	GuarAvgJCT float64 `json:"guaranteed_avg_jct_s"`
	// Givebacks counts the planning rounds in which opportunistic jobs
	// gave harvested GPUs back to guaranteed jobs; GivebackS is the mean
	// time from such a decision until the guaranteed job runs on them
	// (the harvester's leave plus the receiver's join or restart).
	Givebacks int `json:"givebacks"`
	// Failures counts worker failures (Options.FailuresPerGPUDay).
	Failures  int     `json:"failures"`
	GivebackS float64 `json:"giveback_s"`
	Decisions int     `json:"decisions"`
	WallS     float64 `json:"wall_s"`
	// JCTs are the jobs' completion times in seconds, sorted (for plots).
	JCTs []float64 `json:"-"`
	// Sweeps are the figures of the sweeps run beside the trace
	// (Options.Sweeps); the job figures above are the trace's jobs alone.
	Sweeps []SweepResult `json:"sweeps,omitempty"`
}

func (e *engine) result() Result {
	r := Result{Policy: e.o.Policy, Load: e.o.load(), GPUs: e.o.GPUs, Jobs: len(e.all), Decisions: e.decisions}
	first, last := math.Inf(1), 0.0
	var queue float64
	for _, j := range e.all {
		jct := j.finish - j.t.Submit
		r.IdealAvgJCT += j.t.Duration / j.rate(j.hi)
		r.JCTs = append(r.JCTs, jct)
		r.AvgJCT += jct
		if j.t.Priority == jobs.Opportunistic {
			r.OppJobs++
			r.OppAvgJCT += jct
		} else {
			r.GuarAvgJCT += jct
		}
		queue += j.start - j.t.Submit
		r.Resizes += j.resizes
		first = min(first, j.t.Submit)
		last = max(last, j.finish)
	}
	n := float64(len(e.all))
	r.AvgJCT /= n
	r.IdealAvgJCT /= n
	r.AvgQueue = queue / n
	r.ResizesPerJob = float64(r.Resizes) / n
	if r.OppJobs > 0 {
		r.OppAvgJCT /= float64(r.OppJobs)
	}
	if g := len(e.all) - r.OppJobs; g > 0 {
		r.GuarAvgJCT /= float64(g)
	}
	r.Givebacks, r.Failures = e.givebacks, e.failures
	if e.givebacks > 0 {
		r.GivebackS = e.givebackS / float64(e.givebacks)
	}
	slices.Sort(r.JCTs)
	r.P50JCT, r.P95JCT, r.P99JCT = percentile(r.JCTs, 50), percentile(r.JCTs, 95), percentile(r.JCTs, 99)
	r.Makespan = last - first
	if span := e.busySpan(first, last); span > 0 {
		r.GPUUtil = e.busy / (float64(e.o.GPUs) * span)
	}
	return r
}

// busySpan is the time the GPU seconds in e.busy were held in: from the
// first arrival to the last end, the sweeps' trials' included (the trace
// jobs alone span first..last).
func (e *engine) busySpan(first, last float64) float64 {
	for _, s := range e.sweeps {
		if !s.started {
			continue
		}
		first, last = min(first, s.a.Submit), max(last, s.ended)
		for _, j := range s.trials {
			last = max(last, j.finish)
		}
	}
	return last - first
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// WriteTable prints results as an aligned table, one row per policy and
// load, with each average JCT relative to tiresias' and fifo's at the same
// load ("-" when that policy was not run).
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "load\tpolicy\tjobs\tavg_jct_h\tideal_h\tp50_h\tp95_h\tp99_h\tmakespan_h\tavg_queue_h\tgpu_util\tresizes/job\topp_jct_h\tgiveback_s\tvs_tiresias\tvs_fifo\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%g\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.3f\t%.2f\t%s\t%s\t%s\t%s\t\n",
			r.Load, r.Policy, r.Jobs, r.AvgJCT/3600, r.IdealAvgJCT/3600, r.P50JCT/3600, r.P95JCT/3600, r.P99JCT/3600,
			r.Makespan/3600, r.AvgQueue/3600, r.GPUUtil, r.ResizesPerJob,
			orDash(r.OppJobs > 0, "%.2f", r.OppAvgJCT/3600), orDash(r.Givebacks > 0, "%.3f", r.GivebackS),
			ratioText(r, rs, Tiresias), ratioText(r, rs, FIFO))
	}
	return tw.Flush()
}

// WriteMarkdown prints the same table as WriteTable in Markdown.
func WriteMarkdown(w io.Writer, rs []Result) error {
	fmt.Fprintln(w, "| load | policy | avg JCT h | ideal h | p50 h | p95 h | p99 h | makespan h | avg queue h | GPU util | resizes/job | opp. JCT h | give-back s | vs tiresias | vs fifo |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		_, err := fmt.Fprintf(w, "| %g | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f | %.3f | %.2f | %s | %s | %s | %s |\n",
			r.Load, r.Policy, r.AvgJCT/3600, r.IdealAvgJCT/3600, r.P50JCT/3600, r.P95JCT/3600, r.P99JCT/3600,
			r.Makespan/3600, r.AvgQueue/3600, r.GPUUtil, r.ResizesPerJob,
			orDash(r.OppJobs > 0, "%.2f", r.OppAvgJCT/3600), orDash(r.Givebacks > 0, "%.3f", r.GivebackS),
			ratioText(r, rs, Tiresias), ratioText(r, rs, FIFO))
		if err != nil {
			return err
		}
	}
	return nil
}

func orDash(ok bool, format string, v float64) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// ratioText is ratio to two decimals, or "-" when base was not run.
func ratioText(r Result, rs []Result, base Policy) string {
	v := ratio(r, rs, base)
	return orDash(v > 0, "%.2f", v)
}

// ratio is r's average JCT over that of policy base at the same load.
func ratio(r Result, rs []Result, base Policy) float64 {
	for _, b := range rs {
		if b.Policy == base && b.Load == r.Load && b.AvgJCT > 0 {
			return r.AvgJCT / b.AvgJCT
		}
	}
	return 0
}
