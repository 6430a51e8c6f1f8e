package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
)

// nomadBenchOpts are `edl bench e2e --nomad`'s settings.
type nomadBenchOpts struct {
	jobCounts []int         // running jobs per requests-per-round configuration
	rounds    int           // measured rounds per configuration
	starts    int           // job starts for the flap count
	trials    int           // contended starts (a shrinks for b)
	interval  time.Duration // time between planner rounds
}

// parseNomadBench reads the --nomad-* flags' values.
func parseNomadBench(jobCounts string, rounds, starts, trials int, interval time.Duration) (nomadBenchOpts, error) {
	o := nomadBenchOpts{rounds: rounds, starts: starts, trials: trials, interval: interval}
	for _, f := range strings.Split(jobCounts, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 {
			return o, cli.Usagef("bench e2e: --nomad-jobs %q: want comma-separated counts >= 1", jobCounts)
		}
		o.jobCounts = append(o.jobCounts, n)
	}
	switch {
	case rounds < 1:
		return o, cli.Usagef("bench e2e: --nomad-rounds %d: must be >= 1", rounds)
	case starts < 1:
		return o, cli.Usagef("bench e2e: --nomad-starts %d: must be >= 1", starts)
	case starts > 128:
		return o, cli.Usagef("bench e2e: --nomad-starts %d: at most 128 (the fake cluster's GPUs)", starts)
	case trials < 0:
		return o, cli.Usagef("bench e2e: --nomad-trials %d: must be >= 0", trials)
	case interval <= 0:
		return o, cli.Usagef("bench e2e: --nomad-interval %s: must be positive", interval)
	}
	return o, nil
}
