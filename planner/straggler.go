package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/edl-nomad/edl/internal/nonneg"
)

// StragglerConfig tunes straggler replacement inside Decide. The zero value
// (Factor 0) turns it off.
type StragglerConfig struct {
	// Factor: a worker whose step time exceeds Factor x the median of its
	// job's comparable workers is slow (> 1; 0 disables replacement).
	Factor float64
	// Rounds is how many plans in a row a worker must be slow before it is
	// replaced (default 3).
	Rounds int
	// Cooldown is the least time between two replacements in one job.
	Cooldown time.Duration
	// MaxAge is how old a published step time may be and still count as
	// fresh (default 10 s; workers publish about every second). A running
	// worker whose figure is older has stopped publishing (it hangs, or was
	// SIGSTOPped) and counts as the slowest.
	MaxAge time.Duration
}

// DefaultStragglerConfig is what `edl serve` and `edl dev` run with.
func DefaultStragglerConfig() StragglerConfig {
	return StragglerConfig{Factor: 1.5, Rounds: 3, Cooldown: 2 * time.Minute, MaxAge: 10 * time.Second}
}

// Validate names the field at fault.
func (c StragglerConfig) Validate() error {
	switch {
	case c.Factor == 0:
		return nil
	case c.Factor <= 1:
		return fmt.Errorf("planner config: straggler factor %g: must be 0 (off) or above 1", c.Factor)
	}
	return nonneg.First("planner config",
		nonneg.Of("straggler rounds", c.Rounds),
		nonneg.Of("straggler cooldown", c.Cooldown),
		nonneg.Of("straggler max age", c.MaxAge))
}

// WorkerSpeed is one running worker of a job and the step time it last
// published with the generation, world size and time of the measurement.
type WorkerSpeed struct {
	ID string
	// Published is false when the worker has published nothing yet.
	Published bool
	// StepMillis is the average compute time of one step (the gradient,
	// not the all-reduce wait), in milliseconds.
	StepMillis float64
	Generation int64
	WorldSize  int
	At         time.Time
}

// minStragglerWorkers is the fewest workers a job needs before a median
// says anything about one of them.
const minStragglerWorkers = 3

// replaceStragglers picks, for each job of the plan that keeps its size, at
// most one straggler to replace: a worker slower than Factor x the median of
// the fresh figures of the job's current generation, or one that stopped
// publishing, for Rounds plans in a row, once per Cooldown. It is part of
// Decide: pure, from the snapshot alone.
func replaceStragglers(s Snapshot, c StragglerConfig, now time.Time, p *Plan) {
	if c.Factor <= 1 {
		return
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 10 * time.Second
	}
	for i := range s.Jobs {
		j, t := &s.Jobs[i], &p.Targets[i]
		t.Replace, t.ReplaceReason, t.SlowRounds = straggler(j, t, c, now)
	}
}

func straggler(j *JobState, t *Target, c StragglerConfig, now time.Time) (string, string, map[string]int) {
	if len(j.Speeds) < minStragglerWorkers || t.Workers != j.Current || t.Suspend {
		return "", "", nil
	}
	fresh := func(w WorkerSpeed) bool { return w.Published && now.Sub(w.At) <= c.MaxAge }
	var gen int64
	for _, w := range j.Speeds {
		if fresh(w) {
			gen = max(gen, w.Generation)
		}
	}
	var vals []float64
	var compared, stale []WorkerSpeed
	for _, w := range j.Speeds {
		switch {
		case fresh(w) && w.Generation == gen && w.StepMillis > 0:
			compared = append(compared, w)
			vals = append(vals, w.StepMillis)
		case w.Published && !fresh(w):
			stale = append(stale, w)
		}
		// Otherwise unknown: nothing yet, or a fresh figure of an older
		// generation (it is joining the new one).
	}
	if len(compared) < 2 || len(compared)+len(stale) < minStragglerWorkers {
		return "", "", nil
	}
	med := median(vals)
	slow := map[string]int{}
	for _, w := range compared {
		if w.StepMillis > c.Factor*med {
			slow[w.ID] = j.SlowRounds[w.ID] + 1
		}
	}
	for _, w := range stale {
		slow[w.ID] = j.SlowRounds[w.ID] + 1
	}
	if !j.LastReplace.IsZero() && now.Sub(j.LastReplace) < c.Cooldown {
		return "", "", slow
	}
	// The victim: a worker that stopped publishing (the longest silent
	// first), else the slowest; ties by ID.
	var victim *WorkerSpeed
	better := func(a, b *WorkerSpeed) bool {
		as, bs := !fresh(*a), !fresh(*b)
		switch {
		case as != bs:
			return as
		case as && !a.At.Equal(b.At):
			return a.At.Before(b.At)
		case !as && a.StepMillis != b.StepMillis:
			return a.StepMillis > b.StepMillis
		}
		return a.ID < b.ID
	}
	for _, set := range [][]WorkerSpeed{stale, compared} {
		for k := range set {
			w := &set[k]
			if slow[w.ID] >= c.Rounds && (victim == nil || better(w, victim)) {
				victim = w
			}
		}
	}
	if victim == nil {
		return "", "", slow
	}
	delete(slow, victim.ID)
	if !fresh(*victim) {
		return victim.ID, fmt.Sprintf("straggler: worker %s stopped publishing its step time (last figure %s old, generation %d); replaced",
			victim.ID, now.Sub(victim.At).Round(time.Second), victim.Generation), slow
	}
	return victim.ID, fmt.Sprintf("straggler: worker %s at %.1fx the median step time (%.0f ms vs %.0f ms, generation %d, %d workers); replaced",
		victim.ID, victim.StepMillis/med, victim.StepMillis, med, victim.Generation, victim.WorldSize), slow
}

// median of a non-empty slice (sorted in place).
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
