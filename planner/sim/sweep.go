package sim

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/edl-nomad/edl/internal/csvhead"
)

// SweepCase is one workload of a sweep: a trace and the cluster size that
// is natural for it.
type SweepCase struct {
	VC string
	// Trace is the trace file as the manifest names it (relative to the
	// manifest's directory).
	Trace string
	// GPUs is the natural cluster size (see testdata/traces/README.md).
	GPUs int
	// HeldOut marks a workload kept out of tuning.
	HeldOut bool
	// Window says which part of the VC's trace the file holds.
	Window string
}

// Set is "heldout" or "tune".
func (c SweepCase) Set() string {
	if c.HeldOut {
		return "heldout"
	}
	return "tune"
}

// ReadSweepManifest reads a CSV with the columns vc, trace, gpus, set
// (tune or heldout) and optionally window.
func ReadSweepManifest(r io.Reader) ([]SweepCase, error) {
	cr, err := csvhead.NewReader(r, "sweep manifest", "vc", "trace", "gpus", "set")
	if err != nil {
		return nil, err
	}
	col := cr.Col
	var out []SweepCase
	for line, rec := range cr.Rows() {
		c := SweepCase{VC: rec[col["vc"]], Trace: rec[col["trace"]]}
		if c.VC == "" || c.Trace == "" {
			return nil, fmt.Errorf("read sweep manifest line %d: empty vc or trace", line)
		}
		if c.GPUs, err = strconv.Atoi(rec[col["gpus"]]); err != nil || c.GPUs < 1 {
			return nil, fmt.Errorf("read sweep manifest line %d: gpus %q: not a positive integer", line, rec[col["gpus"]])
		}
		switch s := rec[col["set"]]; s {
		case "tune":
		case "heldout":
			c.HeldOut = true
		default:
			return nil, fmt.Errorf("read sweep manifest line %d: set %q: want tune or heldout", line, s)
		}
		if k, ok := col["window"]; ok {
			c.Window = rec[k]
		}
		out = append(out, c)
	}
	if err := cr.Done(len(out), "workloads"); err != nil {
		return nil, err
	}
	return out, nil
}

// FitTrace returns the trace with every request above gpus cut to gpus and
// its duration stretched so that its GPU time stays the same (a job bigger
// than the cluster runs on all of it, longer), and how many jobs it cut.
func FitTrace(tr []TraceJob, gpus int) ([]TraceJob, int) {
	out := slices.Clone(tr)
	cut := 0
	for i := range out {
		if g := out[i].GPUs; g > gpus {
			out[i].Duration *= float64(g) / float64(gpus)
			out[i].GPUs = gpus
			cut++
		}
	}
	return out, cut
}

// SweepPoint is one workload at one cluster size and load: elastic against
// the two baselines. JCTs are seconds.
type SweepPoint struct {
	VC         string  `json:"vc"`
	Set        string  `json:"set"`
	GPUs       int     `json:"gpus"`
	SizeFactor float64 `json:"size_factor"`
	Load       float64 `json:"load"`
	Jobs       int     `json:"jobs"`
	// FittedJobs counts the jobs whose request was cut to the cluster's
	// size (FitTrace).
	FittedJobs    int     `json:"fitted_jobs"`
	ElasticAvg    float64 `json:"elastic_avg_jct_s"`
	ElasticP95    float64 `json:"elastic_p95_jct_s"`
	IdealAvg      float64 `json:"elastic_ideal_avg_jct_s"`
	TiresiasAvg   float64 `json:"tiresias_avg_jct_s"`
	TiresiasP95   float64 `json:"tiresias_p95_jct_s"`
	FIFOAvg       float64 `json:"fifo_avg_jct_s"`
	FIFOP95       float64 `json:"fifo_p95_jct_s"`
	VsTiresias    float64 `json:"vs_tiresias"`
	VsFIFO        float64 `json:"vs_fifo"`
	P95VsTiresias float64 `json:"p95_vs_tiresias"`
	// IdealVsTiresias is the bound: elastic's ideal over Tiresias' average.
	IdealVsTiresias float64 `json:"ideal_vs_tiresias"`
}

// key identifies the baselines a point needs.
func (p SweepPoint) key() string {
	return fmt.Sprintf("%s/%d/%g/%d", p.VC, p.GPUs, p.Load, p.Jobs)
}

func (p *SweepPoint) ratios() {
	p.VsTiresias = p.ElasticAvg / p.TiresiasAvg
	p.VsFIFO = p.ElasticAvg / p.FIFOAvg
	p.P95VsTiresias = p.ElasticP95 / p.TiresiasP95
	p.IdealVsTiresias = p.IdealAvg / p.TiresiasAvg
}

// SweepOptions is a sweep: every case at every size factor (times its
// natural size) and load, under Base's options.
type SweepOptions struct {
	Base     Options
	Sizes    []float64
	Loads    []float64
	Parallel int
	// Reuse holds earlier points whose baselines (fifo, tiresias) are
	// taken instead of run again when workload, size, load and job count
	// match: the baselines do not depend on the elastic policy.
	Reuse []SweepPoint
}

// Sweep runs the cases; traces holds each case's trace by its Trace name.
// Points come back in case, size, load order.
func Sweep(ctx context.Context, cases []SweepCase, traces map[string][]TraceJob, o SweepOptions) ([]SweepPoint, error) {
	reuse := map[string]SweepPoint{}
	for _, p := range o.Reuse {
		reuse[p.key()] = p
	}
	type task struct {
		point  int
		policy Policy
		trace  []TraceJob
		gpus   int
		load   float64
	}
	var points []SweepPoint
	var tasks []task
	for _, c := range cases {
		tr, ok := traces[c.Trace]
		if !ok {
			return nil, fmt.Errorf("sweep %s: no trace %q", c.VC, c.Trace)
		}
		for _, sf := range o.Sizes {
			gpus := max(int(float64(c.GPUs)*sf+0.5), 1)
			fit, cut := FitTrace(tr, gpus)
			for _, l := range o.Loads {
				p := SweepPoint{VC: c.VC, Set: c.Set(), GPUs: gpus, SizeFactor: sf, Load: l, Jobs: len(tr), FittedJobs: cut}
				policies := []Policy{Elastic}
				if old, ok := reuse[p.key()]; ok && old.TiresiasAvg > 0 && old.FIFOAvg > 0 {
					p.TiresiasAvg, p.TiresiasP95, p.FIFOAvg, p.FIFOP95 = old.TiresiasAvg, old.TiresiasP95, old.FIFOAvg, old.FIFOP95
				} else {
					policies = append(policies, Tiresias, FIFO)
				}
				for _, pol := range policies {
					tasks = append(tasks, task{point: len(points), policy: pol, trace: fit, gpus: gpus, load: l})
				}
				points = append(points, p)
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	ch := make(chan task)
	for range max(o.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range ch {
				opt := o.Base
				opt.Policy, opt.GPUs, opt.Load = t.policy, t.gpus, t.load
				r, err := Run(ctx, t.trace, opt)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("sweep %s at %d GPUs, load %g, %s: %w", points[t.point].VC, t.gpus, t.load, t.policy, err)
					cancel()
				}
				p := &points[t.point]
				switch t.policy {
				case Elastic:
					p.ElasticAvg, p.ElasticP95, p.IdealAvg = r.AvgJCT, r.P95JCT, r.IdealAvgJCT
				case Tiresias:
					p.TiresiasAvg, p.TiresiasP95 = r.AvgJCT, r.P95JCT
				case FIFO:
					p.FIFOAvg, p.FIFOP95 = r.AvgJCT, r.P95JCT
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range tasks {
		if ctx.Err() != nil {
			break
		}
		ch <- t
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range points {
		points[i].ratios()
	}
	return points, nil
}

// SweepSummary is the worst and median of each ratio over a set of points.
type SweepSummary struct {
	Set                 string  `json:"summary"`
	Points              int     `json:"points"`
	WorstVsTiresias     float64 `json:"worst_vs_tiresias"`
	MedianVsTiresias    float64 `json:"median_vs_tiresias"`
	WorstVsFIFO         float64 `json:"worst_vs_fifo"`
	MedianVsFIFO        float64 `json:"median_vs_fifo"`
	WorstP95VsTiresias  float64 `json:"worst_p95_vs_tiresias"`
	MedianP95VsTiresias float64 `json:"median_p95_vs_tiresias"`
	// Worst names the point of the worst average ratio to Tiresias.
	Worst string `json:"worst_point"`
}

// Summarize sums up the points of one set ("" for all of them).
func Summarize(ps []SweepPoint, set string) SweepSummary {
	s := SweepSummary{Set: set}
	if set == "" {
		s.Set = "all"
	}
	var vt, vf, p95 []float64
	for _, p := range ps {
		if set != "" && p.Set != set {
			continue
		}
		vt, vf, p95 = append(vt, p.VsTiresias), append(vf, p.VsFIFO), append(p95, p.P95VsTiresias)
		if p.VsTiresias >= s.WorstVsTiresias {
			s.WorstVsTiresias = p.VsTiresias
			s.Worst = fmt.Sprintf("%s@%d load %g", p.VC, p.GPUs, p.Load)
		}
	}
	s.Points = len(vt)
	if s.Points == 0 {
		return s
	}
	med := func(v []float64) float64 {
		slices.Sort(v)
		n := len(v)
		if n%2 == 1 {
			return v[n/2]
		}
		return (v[n/2-1] + v[n/2]) / 2
	}
	s.WorstVsFIFO, s.WorstP95VsTiresias = slices.Max(vf), slices.Max(p95)
	s.MedianVsTiresias, s.MedianVsFIFO, s.MedianP95VsTiresias = med(vt), med(vf), med(p95)
	return s
}

// SweepSets is the summaries WriteSweepTable prints: every point, then
// the tuning set, then the held-out set.
func SweepSets(ps []SweepPoint) []SweepSummary {
	out := []SweepSummary{Summarize(ps, "")}
	for _, set := range []string{"tune", "heldout"} {
		if s := Summarize(ps, set); s.Points > 0 {
			out = append(out, s)
		}
	}
	return out
}

// WriteSweepTable prints one row per point (JCTs in hours), then a
// summary row (worst, median) per set; markdown selects a Markdown table.
func WriteSweepTable(w io.Writer, ps []SweepPoint, markdown bool) error {
	head := []string{"vc", "set", "gpus", "size", "load", "jobs", "elastic_h", "tiresias_h", "fifo_h", "vs_tiresias", "vs_fifo", "p95_vs_tiresias", "ideal_vs_tiresias"}
	rows := [][]string{}
	for _, p := range ps {
		rows = append(rows, []string{p.VC, p.Set, strconv.Itoa(p.GPUs), fmt.Sprintf("%gx", p.SizeFactor), fmt.Sprintf("%g", p.Load), strconv.Itoa(p.Jobs),
			fmt.Sprintf("%.2f", p.ElasticAvg/3600), fmt.Sprintf("%.2f", p.TiresiasAvg/3600), fmt.Sprintf("%.2f", p.FIFOAvg/3600),
			fmt.Sprintf("%.2f", p.VsTiresias), fmt.Sprintf("%.2f", p.VsFIFO), fmt.Sprintf("%.2f", p.P95VsTiresias), fmt.Sprintf("%.2f", p.IdealVsTiresias)})
	}
	for _, s := range SweepSets(ps) {
		rows = append(rows, []string{"worst/median", s.Set, "", "", "", strconv.Itoa(s.Points), "", "", "",
			fmt.Sprintf("%.2f/%.2f", s.WorstVsTiresias, s.MedianVsTiresias), fmt.Sprintf("%.2f/%.2f", s.WorstVsFIFO, s.MedianVsFIFO),
			fmt.Sprintf("%.2f/%.2f", s.WorstP95VsTiresias, s.MedianP95VsTiresias), ""})
	}
	return writeGrid(w, head, rows, markdown)
}

// writeGrid prints a table aligned in columns or in Markdown.
func writeGrid(w io.Writer, head []string, rows [][]string, markdown bool) error {
	if markdown {
		var b strings.Builder
		b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
		b.WriteString(strings.Repeat("---|", len(head)) + "\n")
		for _, r := range rows {
			b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	width := make([]int, len(head))
	for _, r := range append([][]string{head}, rows...) {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range append([][]string{head}, rows...) {
		var line strings.Builder
		for i, c := range r {
			fmt.Fprintf(&line, "%*s  ", width[i], c)
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
