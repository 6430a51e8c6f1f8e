package bench

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/edl-nomad/edl/internal/cli"
)

// benchmark is one `edl bench <name>`; its run lives in its own file.
type benchmark struct {
	summary string
	run     func(ctx context.Context, env Env, args []string, stdout, stderr io.Writer) error
}

// benchmarks are the benchmarks by name.
var benchmarks = map[string]benchmark{
	"allreduce":    {summary: "ring all-reduce across real processes on loopback, against torch.distributed gloo", run: benchAllReduce},
	"api":          {summary: "jobs API throughput and latency (submit, get, list) with 64 clients on loopback", run: benchAPI},
	"chaos":        {summary: "edl dev under faults: worker kills, a stopped worker, Redis restart, planner restarts, a submit burst", run: runBenchChaos},
	"checkpoint":   {summary: "checkpoint write/read on file:// and s3:// against a plain copy, and the training stall", run: benchCheckpoint},
	"e2e":          {summary: "edl dev end to end: submit to first step, scale decision to join, cancel to gone", run: runBenchE2E},
	"elastic":      {summary: "join/leave pauses, failure recovery and the restart baseline with local worker processes", run: benchElastic},
	"planner-idle": {summary: "CPU of an idle control plane (API + planner) with --jobs queued jobs, from its own rusage", run: benchPlannerIdle},
	"sweep":        {summary: "a seeded ASHA sweep of the built-in MLP on edl dev, elastic (cut trials' slots go to survivors) and static", run: runBenchSweep},
	"torch":        {summary: "a torchrun DDP script under torchrun (c10d, tuned), edl restart mode and edl live mode: stall and steps redone on scale-out, scale-in, a killed worker; steady: step time on a fixed world vs plain DDP", run: runBenchTorch},
	"torch-live":   {summary: "live mode (the edl Python package): the survivors' stall at a join, leave or kill, and the sample accounting", run: benchTorchLiveCmd},
}

// Summary is the one line `edl --help` shows for `edl bench`.
const Summary = "run a benchmark that prints its figures as JSON (edl bench --help lists them)"

// Run is `edl bench <name> [flags]`: args[0] names the benchmark.
func Run(ctx context.Context, env Env, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: edl bench <name> [flags]")
		fmt.Fprintln(stderr)
		names := make([]string, 0, len(benchmarks))
		for n := range benchmarks {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(stderr, "  %-10s %s\n", n, benchmarks[n].summary)
		}
		if len(args) == 0 {
			return cli.Usagef("bench: name a benchmark")
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		return cli.Usagef("bench: unknown benchmark %q (see 'edl bench --help')", args[0])
	}
	return b.run(ctx, env, args[1:], stdout, stderr)
}
