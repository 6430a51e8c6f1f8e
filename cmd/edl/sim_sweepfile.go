package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/planner/sweepsim"
)

// hasFlag reports whether args (before a "--") give flag name, as
// -name, --name or --name=value: edl sim's modes are told apart by a flag
// of their own (--sweep-file, --format, --with-sweeps).
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		n := strings.TrimLeft(a, "-")
		if strings.HasPrefix(a, "-") && (n == name || strings.HasPrefix(n, name+"=")) {
			return true
		}
	}
	return false
}

func runSimSweepFile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const summary = "Replay a hyperparameter sweep (FILE: a sweep spec as `edl sweep submit` takes it) on a\n" +
		"simulated cluster, driving the sweep controller's own decision (ASHA cuts, survivors grown)\n" +
		"once elastic (the template's workers range) and once static (every trial at workers.min),\n" +
		"with seeded learning curves or a recorded metric log; prints wall time, slot-seconds used\n" +
		"and idle, the best trial found and the elastic/static ratios."
	fs := newFlagSet("sim", summary, stderr)
	file := fs.String("sweep-file", "", "the sweep spec (JSON, e.g. examples/sweep.json)")
	var c sweepsim.Config
	fs.IntVar(&c.GPUs, "gpus", 0, "slots in the simulated cluster (0: the sweep's budget, min(max_concurrent, num_trials) x workers.min)")
	fs.Float64Var(&c.StepS, "step-s", 0.1, "seconds per step at one worker")
	fs.Float64Var(&c.Overhead, "overhead", 0.1, "parallel cost per added worker: n workers run n/(1+overhead*(n-1)) times faster")
	fs.Float64Var(&c.StartS, "start-cost-s", 2, "seconds from a trial's submission to its first step")
	fs.Float64Var(&c.ResizeS, "resize-cost-s", 0.2, "seconds a resize stalls a trial (edl's stop-free join)")
	fs.Float64Var(&c.StopS, "stop-cost-s", 0.5, "seconds a cut trial still holds its workers")
	fs.Int64Var(&c.ReportEvery, "report-every", 1, "a trial reports its metric every this many steps")
	fs.Int64Var(&c.StepsPerEpoch, "steps-per-epoch", 0, "steps per epoch, for a scheduler in epochs (0: every point at epoch 0)")
	seed := fs.Uint64("curve-seed", 1, "seed of the synthetic learning curves")
	noise := fs.Float64("curve-noise", 0.05, "relative noise of the synthetic learning curves")
	logFile := fs.String("metric-log", "", "replay recorded curves instead: JSON lines {\"trial\": I, \"step\": S, \"value\": V}")
	asJSON := fs.Bool("json", false, "print one JSON line per mode and one for the comparison")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usageErrorf("sim: --sweep-file: a sweep spec file is required")
	}
	spec, err := sweep.ReadSpecFile(*file)
	if err != nil {
		return usageErrorf("sim: --sweep-file: %v", err)
	}
	c.Spec = spec
	// The flags carry the defaults: a 0 given is 0 (no cost, perfect
	// scaling), or refused by name; checked in flag order.
	c.KeepZeros = true
	for _, f := range []struct {
		name string
		ok   bool
		v    any
		want string
	}{
		{"gpus", c.GPUs >= 0, c.GPUs, "must not be negative (0: the sweep's budget)"},
		{"step-s", c.StepS > 0, c.StepS, "must be > 0"},
		{"overhead", c.Overhead >= 0, c.Overhead, "must be >= 0 (0: perfect scaling)"},
		{"start-cost-s", c.StartS >= 0, c.StartS, "must be >= 0"},
		{"resize-cost-s", c.ResizeS >= 0, c.ResizeS, "must be >= 0"},
		{"stop-cost-s", c.StopS >= 0, c.StopS, "must be >= 0"},
		{"report-every", c.ReportEvery >= 1, c.ReportEvery, "must be >= 1"},
		{"steps-per-epoch", c.StepsPerEpoch >= 0, c.StepsPerEpoch, "must be >= 0 (0: every point at epoch 0)"},
	} {
		if !f.ok {
			return usageErrorf("sim: --%s %v: %s", f.name, f.v, f.want)
		}
	}
	if *noise < 0 {
		return usageErrorf("sim: --curve-noise %g: must not be negative (0: noiseless curves)", *noise)
	}
	c.Curves = sweepsim.Seeded{Seed: *seed, Noise: *noise}
	if *logFile != "" {
		f, err := os.Open(*logFile)
		if err != nil {
			return usageErrorf("sim: --metric-log: %v", err)
		}
		rec, err := sweepsim.ReadRecorded(f)
		f.Close()
		if err != nil {
			return usageErrorf("sim: --metric-log %s: %v", *logFile, err)
		}
		c.Curves = rec
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cmp, err := sweepsim.Compare(c)
	if err != nil {
		return fmt.Errorf("sim: %s: %w", *file, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range []sweepsim.Result{cmp.Elastic, cmp.Static} {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return enc.Encode(map[string]any{"mode": "elastic/static", "wall_ratio": round3(cmp.WallRatio),
			"slot_s_ratio": round3(cmp.SlotUsedRatio), "same_best_trial": cmp.SameBest})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\twall_s\tslot_s_used\tslot_s_idle\tidle_while_growable\tbest\tbest_metric\tcut\tcompleted\tgrown\tmax_workers")
	for _, r := range []sweepsim.Result{cmp.Elastic, cmp.Static} {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.4g\t%d\t%d\t%d\t%d\n", r.Mode, r.WallS, r.SlotUsed, r.SlotIdle,
			r.IdleWhileGrowable, r.BestIndex, r.BestMetric, r.Cut, r.Completed, r.Grown, r.MaxTrialWorkers)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	same := "no"
	if cmp.SameBest {
		same = "yes"
	}
	params, _ := json.Marshal(cmp.Elastic.BestTrial)
	fmt.Fprintf(stdout, "elastic/static: wall %.3f, slot-s used %.3f; same best trial: %s (trial %d %s); best by the full curves: trial %d\n",
		cmp.WallRatio, cmp.SlotUsedRatio, same, cmp.Elastic.BestIndex, params, cmp.Elastic.OracleBest)
	return nil
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
