package elasticbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// overhead measures the coordination overhead on a noisy machine: rounds
// that each run a static world (n ranks, no Redis) and an elastic one (n
// workers, generation 1, no events) for Warmup+OverheadSteps steps, the
// two in turn and the order alternating round by round, so both see the
// same load. Each round gives one ratio; the figure is their median, with
// the smallest and largest beside it.
func (b *bench) overhead(ctx context.Context, res *Result) error {
	var pcts, statics, elastics []float64
	for r := range b.cfg.OverheadRounds {
		kinds := []string{"static", "elastic"}
		if r%2 == 1 {
			slices.Reverse(kinds)
		}
		step := map[string]time.Duration{}
		for _, kind := range kinds {
			d, err := b.steadyRound(ctx, kind, r)
			if err != nil {
				return fmt.Errorf("overhead round %d (%s): %w", r+1, kind, err)
			}
			step[kind] = d
		}
		s, e := float64(step["static"]), float64(step["elastic"])
		pcts = append(pcts, 100*(e-s)/s)
		statics, elastics = append(statics, s), append(elastics, e)
	}
	slices.Sort(pcts)
	res.CoordOverheadPct = round(median(pcts))
	res.CoordOverheadMinPct, res.CoordOverheadMaxPct = round(pcts[0]), round(pcts[len(pcts)-1])
	res.CoordOverheadRounds = len(pcts)
	res.OverheadStaticStepMS = ms(time.Duration(median(statics)))
	res.OverheadElasticStepMS = ms(time.Duration(median(elastics)))
	return nil
}

// steadyRound runs one world of the given kind until rank 0 has logged
// Warmup+OverheadSteps steps, stops it, and returns the median time between
// two steps after the warm-up.
func (b *bench) steadyRound(ctx context.Context, kind string, r int) (time.Duration, error) {
	n := b.cfg.Workers
	job := fmt.Sprintf("overhead-%s-%d", kind, r)
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", job, i)
		names = append(names, name)
		if kind == "static" {
			rdv := filepath.Join(b.dir, job)
			if err := os.MkdirAll(rdv, 0o755); err != nil {
				return 0, err
			}
			b.start(name, "--job", job, "--static-world", strconv.Itoa(n), "--static-rank", strconv.Itoa(i), "--static-dir", rdv)
		} else {
			// No --debug-samples: the static world records no samples either.
			b.start(name, "--job", job, "--redis", b.redis, "--worker-id", name, "--min-start", strconv.Itoa(n))
		}
	}
	defer b.stop(names)
	want := b.cfg.Warmup + b.cfg.OverheadSteps
	lines, err := b.waitSteps(ctx, names[0], want, 5*time.Minute)
	if err != nil {
		return 0, err
	}
	return medianInterval(lines[b.cfg.Warmup:want]), nil
}

// stop kills the named workers and waits for them.
func (b *bench) stop(names []string) {
	for _, name := range names {
		if c := b.procs[name]; c != nil && c.Process != nil && c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// median of sorted or unsorted values (not changed).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
