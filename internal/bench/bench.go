package bench

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/edl-nomad/edl/internal/cli"
)

// benchmark is one `edl bench <name>`; each registers itself from init.
type benchmark struct {
	name    string
	summary string
	run     func(ctx context.Context, env Env, args []string, stdout, stderr io.Writer) error
}

var benchmarks = map[string]benchmark{}

func registerBench(b benchmark) {
	if _, dup := benchmarks[b.name]; dup {
		panic("edl: benchmark registered twice: " + b.name)
	}
	benchmarks[b.name] = b
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
