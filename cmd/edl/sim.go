package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/internal/cli"
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
	if len(args) > 0 && args[0] == "gen" {
		return runSimGen(args[1:], stdout, stderr)
	}
	switch {
	case hasFlag(args, "sweep-file"):
		return runSimSweepFile(ctx, args, stdout, stderr) // sim_sweepfile.go
	case hasFlag(args, "format"):
		return runSimDeadline(ctx, args, stdout, stderr) // sim_deadline.go
	case hasFlag(args, "with-sweeps"):
		return runSimWithSweeps(ctx, args, stdout, stderr) // sim_trials.go
	}
	const summary = "Replay a job trace (CSV: job_id, submit_s, num_gpus, duration_s[, vc][, priority]) through\n" +
		"planner.Decide on a simulated cluster and print the figures (JCT, makespan, queueing,\n" +
		"GPU utilisation, resizes, opportunistic give-backs). --compare runs every policy; --loads\n" +
		"runs each at several arrival rates; both print a table and one JSON line per run.\n" +
		"'edl sim gen --help' generates a synthetic trace; 'edl sim --sweep-file FILE' replays a\n" +
		"hyperparameter sweep (ASHA, elastic against static trials); 'edl sim --with-sweeps FILE'\n" +
		"replays many such sweeps beside the trace's jobs; 'edl sim --format ...' replays deadline jobs."
	fs := newFlagSet("sim", summary, stderr)
	d := sim.DefaultOptions(sim.Elastic)
	cf := addClusterFlags(fs, d)
	trace, gpus, perNode, policy, load := cf.trace, cf.gpus, cf.perNode, cf.policy, cf.load
	loads := fs.String("loads", "", "comma-separated arrival-rate factors to run each policy at (e.g. 0.5,1,2,4); overrides --load")
	resize := fs.Float64("resize-cost-s", -1, "seconds one resize stalls a job, join and leave alike (-1: the policy's measured costs: elastic 0.047 s join, 0.014 s leave; elastic-restart torchrun's 3.8 s join, 16 s leave plus the progress since the last checkpoint)")
	ckpt := fs.Float64("checkpoint-period-s", d.CheckpointPeriod.Seconds(), "seconds of running between a job's checkpoints (a restart-style resize loses the progress since the last one; 0: nothing is lost)")
	failures := fs.Float64("failures-per-gpu-day", 0, "worker failures per GPU and day of running (each costs elastic 0.6 s, elastic-restart and the static policies 4.1 s plus the progress since the last checkpoint); 0: none")
	restart := fs.Float64("restart-cost-s", d.RestartCost.Seconds(), "seconds resuming a preempted job costs")
	minF := fs.Float64("min-factor", d.MinFactor, "elastic min workers = max(1, round(min-factor * request))")
	maxF := fs.Float64("max-factor", d.MaxFactor, "elastic max workers = round(max-factor * request)")
	queue := fs.Float64("queue-threshold", d.QueueThreshold, "the tiresias baseline's (and --legacy-policy's) first queue bound, GPU seconds of attained service; elastic uses the planner's default queues")
	legacy := fs.Bool("legacy-policy", false, "elastic policies plan with the earlier policy: two attained-service queues, and guaranteed jobs grow before opportunistic ones get their minimum (to compare with the current one)")
	oracle := fs.Bool("oracle-order", false, "elastic policies rank jobs by the remaining work the trace records instead of attained service (shortest remaining first): not realisable, it shows what a perfect size estimate would buy")
	las := fs.Bool("las-order", false, "elastic policies rank jobs by least attained service (eight queues from 1 GPU-hour) instead of by the Gittins index learnt from the service of the jobs finished so far: the earlier order, to compare with the current one")
	qpg := fs.Float64("queue-per-gpu", -1, "elastic policies' first queue bound in GPU seconds per GPU of the cluster (28.125: 1 GPU-hour on 128 GPUs, proportionally elsewhere; -1: the planner's default, an absolute 1 GPU-hour at any size)")
	tq := fs.Int("tiresias-queues", d.TiresiasQueues, "least-attained-service queues of the tiresias baseline (2: two-level Tiresias; 8: the queues elastic uses)")
	backfill := fs.Bool("backfill", false, "fifo starts a later job that fits while an earlier one waits (default: strict first come, first served)")
	asJSON := fs.Bool("json", false, "print one JSON line per run instead of a table")
	markdown := fs.Bool("markdown", false, "print the table in Markdown")
	plotTo := fs.String("plot", "", "write a PNG to this file: the JCT CDF of the policies run, or with several loads average JCT against load")
	compare := fs.Bool("compare", false, "run all policies (fifo, tiresias, elastic-restart, elastic)")
	sw := sweepFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	policies := []sim.Policy{sim.Policy(*policy)}
	if *compare {
		policies = sim.Policies
	}
	if err := cf.check(); err != nil {
		return err
	}
	factors := []float64{*load}
	if *loads != "" {
		var err error
		if factors, err = parseLoads(*loads); err != nil {
			return usageErrorf("sim: --loads: %v", err)
		}
	}
	// What every run takes from the flags, the sweep's and the trace's alike.
	base := d
	base.GPUsPerNode = *perNode
	var err error
	if base.ResizeCost, err = cli.Seconds("resize-cost-s", *resize); err != nil {
		return usageErrorf("sim: %v", err)
	}
	if *resize < 0 {
		base.ResizeCost = -1
	}
	if base.CheckpointPeriod, err = cli.Seconds("checkpoint-period-s", *ckpt); err != nil {
		return usageErrorf("sim: %v", err)
	}
	base.FailuresPerGPUDay = *failures
	if base.RestartCost, err = cli.Seconds("restart-cost-s", *restart); err != nil {
		return usageErrorf("sim: %v", err)
	}
	base.MinFactor, base.MaxFactor, base.QueueThreshold = *minF, *maxF, *queue
	base.TiresiasQueues, base.QueuePerGPU, base.LASOrder = *tq, *qpg, *las
	if err := writableFile(*plotTo); err != nil {
		return usageErrorf("sim: --plot: %v", err) // before the runs, not after them
	}
	if sw.on {
		if *loads == "" {
			factors = []float64{0.5, 1, 2, 4}
		}
		return runSweep(ctx, sw, base, factors, *asJSON, *markdown, *plotTo, stdout)
	}
	jobs, err := readTraceFile(*trace)
	if err != nil {
		return err
	}
	var results []sim.Result
	for _, lf := range factors {
		for _, p := range policies {
			if err := ctx.Err(); err != nil {
				return err
			}
			o := base
			o.Policy, o.GPUs, o.Load = p, *gpus, lf
			o.Backfill, o.LegacyPolicy, o.OracleOrder = *backfill, *legacy, *oracle
			if err := o.Validate(); err != nil {
				return usageErrorf("sim: %v", err)
			}
			r, err := sim.Run(ctx, jobs, o)
			if err != nil {
				return fmt.Errorf("sim %s at load %g: %w", p, lf, err)
			}
			results = append(results, r)
		}
	}
	switch {
	case *markdown:
		if err := sim.WriteMarkdown(stdout, results); err != nil {
			return err
		}
	case !*asJSON || len(results) > 1:
		if err := sim.WriteTable(stdout, results); err != nil {
			return err
		}
	}
	if *asJSON || (len(results) > 1 && !*markdown) {
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
		if len(factors) > 1 {
			title := fmt.Sprintf("Average JCT vs load: %s, %d jobs, %d GPUs", filepath.Base(*trace), len(jobs), *gpus)
			err = sim.WriteLoadPlot(out, title, results)
		} else {
			title := fmt.Sprintf("JCT CDF: %s, %d jobs, %d GPUs, load %g", filepath.Base(*trace), len(jobs), *gpus, factors[0])
			err = sim.WriteJCTPlot(out, title, results)
		}
		if err != nil {
			out.Close()
			return fmt.Errorf("sim: %w", err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
	}
	return nil
}

// parseLoads reads "0.5,1,2,4": positive, finite, distinct factors.
func parseLoads(s string) ([]float64, error) {
	var out []float64
	seen := map[float64]bool{}
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("%q: not a positive number", part)
		}
		if seen[v] {
			return nil, fmt.Errorf("%q: given twice", part)
		}
		seen[v] = true
		out = append(out, v)
	}
	return out, nil
}

func runSimGen(args []string, stdout, stderr io.Writer) error {
	const summary = "Generate a synthetic, seeded GPU-cluster trace in the CSV form 'edl sim' reads\n" +
		"(columns job_id, submit_s, num_gpus, duration_s, gpu_time_s, vc, priority): a Helios/Pollux-like\n" +
		"mix of many short jobs (with bursts of sweeps), few huge ones, and opportunistic jobs.\n" +
		"The same flags give the same file."
	fs := newFlagSet("sim gen", summary, stderr)
	g := sim.DefaultGenOptions()
	seed := fs.Uint64("seed", g.Seed, "random seed")
	n := fs.Int("jobs", g.Jobs, "number of jobs")
	gpus := fs.Int("gpus", g.GPUs, "GPUs of the cluster the trace is sized for (largest request, and the offered load)")
	util := fs.Float64("offered-load", g.OfferedLoad, "GPU time asked per GPU of the cluster per second at load 1 (0.8: 80 % of the cluster's GPU time)")
	opp := fs.Float64("opportunistic", g.OpportunisticFrac, "share of jobs that are opportunistic")
	out := fs.String("out", "", "write the CSV here (default: stdout)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	g.Seed, g.Jobs, g.GPUs, g.OfferedLoad, g.OpportunisticFrac = *seed, *n, *gpus, *util, *opp
	if err := g.Validate(); err != nil {
		return usageErrorf("sim gen: %v", err)
	}
	w := stdout
	var file *os.File
	if *out != "" {
		var err error
		if file, err = os.Create(*out); err != nil {
			return fmt.Errorf("sim gen: --out: %w", err)
		}
		w = file
	}
	if err := sim.WriteTraceCSV(w, sim.Generate(g)); err != nil {
		if file != nil {
			file.Close()
		}
		return fmt.Errorf("sim gen: %w", err)
	}
	if file != nil {
		if err := file.Close(); err != nil {
			return fmt.Errorf("sim gen: --out: %w", err)
		}
	}
	return nil
}

// clusterFlags are the flags of edl sim's trace modes that say which
// trace runs on what cluster under which policy.
type clusterFlags struct {
	trace, policy *string
	gpus, perNode *int
	load          *float64
}

func addClusterFlags(fs *flag.FlagSet, d sim.Options) clusterFlags {
	return clusterFlags{
		trace:   fs.String("trace", "testdata/traces/philly_vc_ee9e8c.csv", "trace CSV file"),
		gpus:    fs.Int("gpus", d.GPUs, "GPUs in the simulated cluster (every job must fit)"),
		perNode: fs.Int("gpus-per-node", d.GPUsPerNode, "GPUs per node"),
		policy:  fs.String("policy", string(sim.Elastic), "policy: elastic, elastic-restart, fifo or tiresias"),
		load:    fs.Float64("load", 1, "arrival-rate factor: submit times are divided by it (2: jobs arrive twice as fast)"),
	}
}

func (c clusterFlags) check() error {
	if !(*c.load > 0) || math.IsInf(*c.load, 0) {
		return usageErrorf("sim: --load %g: must be a positive number", *c.load)
	}
	return nil
}

// writableFile says why a file could not be written at path ("" passes):
// its folder is missing or not writable, or path is a folder. Nothing is
// left behind.
func writableFile(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, ".edl-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: folder %s is not writable", path, dir)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
