package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// Result is one simulation's figures; the JSON names are what `edl sim
// --json` prints.
type Result struct {
	Policy    Policy  `json:"policy"`
	GPUs      int     `json:"gpus"`
	Jobs      int     `json:"jobs"`
	AvgJCT    float64 `json:"avg_jct_s"`
	P50JCT    float64 `json:"p50_jct_s"`
	P95JCT    float64 `json:"p95_jct_s"`
	P99JCT    float64 `json:"p99_jct_s"`
	Makespan  float64 `json:"makespan_s"`
	AvgQueue  float64 `json:"avg_queue_s"`
	GPUUtil   float64 `json:"gpu_util"`
	Resizes   int     `json:"resizes"`
	Decisions int     `json:"decisions"`
	WallS     float64 `json:"wall_s"`
	// JCTs are the jobs' completion times in seconds, sorted (for plots).
	JCTs []float64 `json:"-"`
}

func (e *engine) result() Result {
	r := Result{Policy: e.o.Policy, GPUs: e.o.GPUs, Jobs: len(e.all), Decisions: e.decisions}
	first, last := math.Inf(1), 0.0
	var queue float64
	for _, j := range e.all {
		jct := j.finish - j.t.Submit
		r.JCTs = append(r.JCTs, jct)
		r.AvgJCT += jct
		queue += j.start - j.t.Submit
		r.Resizes += j.resizes
		first = min(first, j.t.Submit)
		last = max(last, j.finish)
	}
	n := float64(len(e.all))
	r.AvgJCT /= n
	r.AvgQueue = queue / n
	slices.Sort(r.JCTs)
	r.P50JCT, r.P95JCT, r.P99JCT = percentile(r.JCTs, 50), percentile(r.JCTs, 95), percentile(r.JCTs, 99)
	r.Makespan = last - first
	if r.Makespan > 0 {
		r.GPUUtil = e.busy / (float64(e.o.GPUs) * r.Makespan)
	}
	return r
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// WriteTable prints results as an aligned table with each policy's average
// JCT relative to the first result's.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tjobs\tavg_jct_h\tp50_h\tp95_h\tp99_h\tmakespan_h\tavg_queue_h\tgpu_util\tresizes\tjct_vs_"+string(first(rs))+"\t")
	for _, r := range rs {
		ratio := 0.0
		if rs[0].AvgJCT > 0 {
			ratio = r.AvgJCT / rs[0].AvgJCT
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.3f\t%d\t%.2f\t\n",
			r.Policy, r.Jobs, r.AvgJCT/3600, r.P50JCT/3600, r.P95JCT/3600, r.P99JCT/3600,
			r.Makespan/3600, r.AvgQueue/3600, r.GPUUtil, r.Resizes, ratio)
	}
	return tw.Flush()
}

func first(rs []Result) Policy {
	if len(rs) == 0 {
		return ""
	}
	return rs[0].Policy
}
