package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/planner/sim"
	"github.com/edl-nomad/edl/planner/sweepsim"
)

// runSimWithSweeps is `edl sim --with-sweeps FILE`: many copies of a
// sweep submitted beside a trace's jobs on one simulated cluster, run
// twice under one policy: the trials elastic (cut trials' GPUs go to the
// survivors) and static (every trial at workers.min).
func runSimWithSweeps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const summary = "Replay hyperparameter sweeps beside a trace's jobs on one simulated cluster: --sweeps copies\n" +
		"of the sweep in FILE (as `edl sweep submit` takes it; each with its own seed and learning\n" +
		"curves) arrive --sweep-every seconds apart; the sweep controller's own decision runs every\n" +
		"--sweep-round-s on what the trials did, and the planner places trials and jobs alike. It runs\n" +
		"twice: trials elastic (a cut trial's GPUs go to the best survivors) and static (every trial\n" +
		"at workers.min), and prints the sweeps' makespan and GPU time and the trace jobs' JCT, side\n" +
		"by side."
	fs := newFlagSet("sim", summary, stderr)
	d := sim.DefaultOptions(sim.Elastic)
	file := fs.String("with-sweeps", "", "the sweep spec (JSON, e.g. examples/sweep.json)")
	cf := addClusterFlags(fs, d) // the trace's jobs; --load applies to the sweeps' arrivals too
	n := fs.Int("sweeps", 10, "how many sweeps")
	every := fs.Float64("sweep-every", 0, "seconds between two sweeps' arrivals, in the trace's time (0: spread over the trace's span)")
	first := fs.Float64("sweep-first", 0, "the first sweep's arrival, in the trace's seconds")
	stepS := fs.Float64("sweep-step-s", 10, "a trial's step time at the template's workers.min, seconds")
	spe := fs.Int64("steps-per-epoch", 0, "steps per epoch, for a scheduler counted in epochs")
	round := fs.Float64("sweep-round-s", sim.DefaultSweepRound.Seconds(), "the sweep controller's period, seconds")
	seed := fs.Uint64("curve-seed", 1, "seed of the first sweep's learning curves (sweep k: seed+k)")
	noise := fs.Float64("curve-noise", 0.05, "relative noise of the learning curves")
	asJSON := fs.Bool("json", false, "print one JSON line per run and one for the comparison")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *file == "":
		return usageErrorf("sim: --with-sweeps: a sweep spec file is required")
	case *n < 1:
		return usageErrorf("sim: --sweeps %d: want at least 1", *n)
	case *every < 0 || math.IsNaN(*every) || math.IsInf(*every, 0):
		return usageErrorf("sim: --sweep-every %g: want seconds >= 0", *every)
	case *first < 0 || math.IsNaN(*first) || math.IsInf(*first, 0):
		return usageErrorf("sim: --sweep-first %g: want seconds >= 0", *first)
	case !(*round > 0) || math.IsInf(*round, 0):
		return usageErrorf("sim: --sweep-round-s %g: want a positive number", *round)
	case !(*stepS > 0) || math.IsInf(*stepS, 0):
		return usageErrorf("sim: --sweep-step-s %g: want a positive number", *stepS)
	case *spe < 0:
		return usageErrorf("sim: --steps-per-epoch %d: want 0 or more (0: every point at epoch 0)", *spe)
	case *noise < 0:
		return usageErrorf("sim: --curve-noise %g: must not be negative (0: noiseless curves)", *noise)
	}
	if err := cf.check(); err != nil {
		return err
	}
	spec, err := sweep.ReadSpecFile(*file)
	if err != nil {
		return usageErrorf("sim: --with-sweeps: %v", err)
	}
	tr, err := readTraceFile(*cf.trace)
	if err != nil {
		return err
	}
	gap := *every
	if gap == 0 && len(tr) > 0 {
		gap = (tr[len(tr)-1].Submit - *first) / float64(*n)
	}
	o := d
	o.Policy, o.GPUs, o.GPUsPerNode, o.Load = sim.Policy(*cf.policy), *cf.gpus, *cf.perNode, *cf.load
	if o.SweepRound, err = cli.Seconds("sweep-round-s", *round); err != nil {
		return usageErrorf("sim: %v", err)
	}
	for k := range *n {
		o.Sweeps = append(o.Sweeps, sim.SweepArrival{ID: fmt.Sprintf("sweep%02d", k), Tenant: "sweeps",
			Submit: *first + float64(k)*max(gap, 0), Spec: spec, StepS: *stepS, StepsPerEpoch: *spe,
			Curves: sweepsim.Seeded{Seed: *seed + uint64(k), Noise: *noise}})
	}
	if err := o.Validate(); err != nil {
		return usageErrorf("sim: %v", err)
	}
	var runs [2]sim.Result
	for i, static := range []bool{false, true} {
		if err := ctx.Err(); err != nil {
			return err
		}
		o.StaticTrials = static
		if runs[i], err = sim.Run(ctx, tr, o); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
	}
	return writeSweepsBeside(stdout, runs[0], runs[1], *asJSON)
}

// readTraceFile reads a trace CSV (sim.ReadTrace).
func readTraceFile(path string) ([]sim.TraceJob, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErrorf("sim: --trace: %v", err)
	}
	defer f.Close()
	tr, err := sim.ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return tr, nil
}

// sweepsSummary is one run's sweep figures and the trace jobs' JCT.
type sweepsSummary struct {
	Mode   string `json:"mode"` // elastic or static trials
	Policy string `json:"policy"`
	sim.SweepsSummary
	JobsAvgJCTS float64 `json:"jobs_avg_jct_s"`
	JobsP95JCTS float64 `json:"jobs_p95_jct_s"`
	GPUUtil     float64 `json:"gpu_util"`
}

func summarizeSweeps(mode string, r sim.Result) sweepsSummary {
	return sweepsSummary{Mode: mode, Policy: string(r.Policy), SweepsSummary: sim.SummarizeSweeps(r.Sweeps),
		JobsAvgJCTS: r.AvgJCT, JobsP95JCTS: r.P95JCT, GPUUtil: r.GPUUtil}
}

func writeSweepsBeside(w io.Writer, el, st sim.Result, asJSON bool) error {
	e, s := summarizeSweeps("elastic", el), summarizeSweeps("static", st)
	same := 0
	for k := range el.Sweeps {
		if el.Sweeps[k].BestIndex == st.Sweeps[k].BestIndex {
			same++
		}
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return round3(a / b)
	}
	cmp := map[string]any{"mode": "elastic/static", "sweep_makespan_ratio": ratio(e.MeanMakespanS, s.MeanMakespanS),
		"sweep_gpu_h_ratio": ratio(e.GPUHours, s.GPUHours), "jobs_avg_jct_ratio": ratio(e.JobsAvgJCTS, s.JobsAvgJCTS),
		"same_best_trial": same, "sweeps": len(el.Sweeps)}
	if asJSON {
		enc := json.NewEncoder(w)
		for _, v := range []any{e, s, cmp} {
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "trials\tpolicy\tsweeps\tmakespan_h mean\tp95\tsweep_gpu_h\tmax_workers\tgrown\tjobs_jct_h avg\tp95\tgpu_util")
	for _, r := range []sweepsSummary{e, s} {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.1f\t%d\t%d\t%.2f\t%.2f\t%.3f\n", r.Mode, r.Policy, r.Sweeps, r.MeanMakespanS/3600,
			r.P95MakespanS/3600, r.GPUHours, r.MaxTrialWorkers, r.Grown, r.JobsAvgJCTS/3600, r.JobsP95JCTS/3600, r.GPUUtil)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "elastic/static: sweep makespan %.3f, sweep GPU time %.3f, the trace jobs' avg JCT %.3f; same best trial in %d of %d sweeps\n",
		cmp["sweep_makespan_ratio"], cmp["sweep_gpu_h_ratio"], cmp["jobs_avg_jct_ratio"], same, len(el.Sweeps))
	return err
}
