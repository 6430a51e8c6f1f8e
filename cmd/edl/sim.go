package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/edl-nomad/edl/planner/sim"
)

func init() {
	register(command{
		name:    "sim",
		summary: "replay a GPU-cluster trace through the planner and report job completion times",
		run:     runSim,
	})
}

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const summary = "Replay a job trace (CSV: job_id, submit_s, num_gpus, duration_s[, vc]) through\n" +
		"planner.Decide on a simulated cluster and print the figures (JCT, makespan, queueing,\n" +
		"GPU utilisation, resizes). --compare runs every policy and prints a table and one JSON\n" +
		"line each."
	fs := newFlagSet("sim", summary, stderr)
	d := sim.DefaultOptions(sim.Elastic)
	trace := fs.String("trace", "testdata/traces/philly_vc_ee9e8c.csv", "trace CSV file")
	gpus := fs.Int("gpus", d.GPUs, "GPUs in the simulated cluster (every job must fit)")
	perNode := fs.Int("gpus-per-node", d.GPUsPerNode, "GPUs per node")
	policy := fs.String("policy", string(sim.Elastic), "policy: elastic, elastic-restart, fifo or tiresias")
	resize := fs.Float64("resize-cost-s", -1, "seconds of progress one resize costs (-1: the policy's default, 1 for elastic, --restart-cost-s for the others)")
	restart := fs.Float64("restart-cost-s", d.RestartCost.Seconds(), "seconds a stop-and-restart resize or a preemption costs")
	minF := fs.Float64("min-factor", d.MinFactor, "elastic min workers = max(1, round(min-factor * request))")
	maxF := fs.Float64("max-factor", d.MaxFactor, "elastic max workers = round(max-factor * request)")
	queue := fs.Float64("queue-threshold", d.QueueThreshold, "Tiresias two-level threshold, GPU seconds of attained service")
	backfill := fs.Bool("backfill", false, "fifo starts a later job that fits while an earlier one waits (default: strict first come, first served)")
	asJSON := fs.Bool("json", false, "print one JSON line per policy instead of a table")
	plotTo := fs.String("plot", "", "write a PNG of the JCT CDF of the policies run to this file")
	compare := fs.Bool("compare", false, "run all policies (fifo, tiresias, elastic-restart, elastic)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	policies := []sim.Policy{sim.Policy(*policy)}
	if *compare {
		policies = sim.Policies
	}
	f, err := os.Open(*trace)
	if err != nil {
		return usageErrorf("sim: --trace: %v", err)
	}
	jobs, err := sim.ReadTrace(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	var results []sim.Result
	for _, p := range policies {
		if err := ctx.Err(); err != nil {
			return err
		}
		o := d
		o.Policy, o.GPUs, o.GPUsPerNode = p, *gpus, *perNode
		o.ResizeCost = time.Duration(*resize * float64(time.Second))
		if *resize < 0 {
			o.ResizeCost = -1
		}
		o.RestartCost = time.Duration(*restart * float64(time.Second))
		o.MinFactor, o.MaxFactor, o.QueueThreshold = *minF, *maxF, *queue
		o.Backfill = *backfill
		if err := o.Validate(); err != nil {
			return usageErrorf("sim: %v", err)
		}
		r, err := sim.Run(ctx, jobs, o)
		if err != nil {
			return fmt.Errorf("sim %s: %w", p, err)
		}
		results = append(results, r)
	}
	if !*asJSON || *compare {
		if err := sim.WriteTable(stdout, results); err != nil {
			return err
		}
	}
	if *asJSON || *compare {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	if *plotTo != "" {
		out, err := os.Create(*plotTo)
		if err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
		title := fmt.Sprintf("JCT CDF: %s, %d jobs, %d GPUs", filepath.Base(*trace), len(jobs), *gpus)
		if err := sim.WriteJCTPlot(out, title, results); err != nil {
			out.Close()
			return fmt.Errorf("sim: %w", err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
	}
	return nil
}
