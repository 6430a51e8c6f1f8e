package loop

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// WorkerSpeeds reads the workers' own measure of their speed: per worker
// id, the average compute time of one step in milliseconds (the gradient,
// not the all-reduce wait). cmd/edl implements it over the workers' Redis
// hash.
type WorkerSpeeds interface {
	StepMillis(ctx context.Context, jobID string) (map[string]float64, error)
}

// minStragglerWorkers is the fewest running workers a job needs before a
// median says anything about one of them.
const minStragglerWorkers = 3

// stragglers replaces at most one slow worker of a running job: one whose
// step time exceeded StragglerFactor x the median of the job's running
// workers in StragglerRounds consecutive rounds, once per
// StragglerCooldown. The cluster places the replacement.
func (l *Loop) stragglers(ctx context.Context, j jobs.Job, ws []jobs.Worker, now time.Time) error {
	if l.cfg.Speeds == nil || j.State != jobs.Running {
		return nil
	}
	tr := l.tracked(j.ID)
	var running []string
	for _, w := range ws {
		if w.State == jobs.WorkerRunning {
			running = append(running, w.ID)
		}
	}
	if len(running) < minStragglerWorkers {
		tr.slow = nil
		return nil
	}
	ms, err := l.cfg.Speeds.StepMillis(ctx, j.ID)
	if err != nil {
		// Not fatal for the round; the counts stand until the next read.
		l.log.Warn("read worker step times", "job", j.ID, "err", err)
		return nil
	}
	speed := map[string]float64{}
	for _, id := range running {
		if v, ok := ms[id]; ok && v > 0 {
			speed[id] = v
		}
	}
	if len(speed) < minStragglerWorkers {
		tr.slow = nil
		return nil
	}
	vals := make([]float64, 0, len(speed))
	for _, v := range speed {
		vals = append(vals, v)
	}
	med := median(vals)
	slow := map[string]int{}
	for id, v := range speed {
		if v > l.cfg.StragglerFactor*med {
			slow[id] = tr.slow[id] + 1
		}
	}
	tr.slow = slow
	if !tr.lastReplace.IsZero() && now.Sub(tr.lastReplace) < l.cfg.StragglerCooldown {
		return nil
	}
	victim := ""
	for id, n := range slow {
		if n >= l.cfg.StragglerRounds && (victim == "" || speed[id] > speed[victim] || speed[id] == speed[victim] && id < victim) {
			victim = id
		}
	}
	if victim == "" {
		return nil
	}
	msg := fmt.Sprintf("straggler: worker %s at %.1fx the median step time (%.0f ms vs %.0f ms); replaced",
		victim, speed[victim]/med, speed[victim], med)
	if err := l.cluster.StopWorker(ctx, j.ID, victim, msg); err != nil {
		_, _ = l.store.AppendEvent(ctx, j.ID, jobs.Event{Time: now, Type: jobs.EventError,
			Message: fmt.Sprintf("straggler: replacing worker %s failed: %v", victim, err)})
		return fmt.Errorf("replace straggler %s of %s: %w", victim, j.ID, err)
	}
	tr.lastReplace = now
	delete(tr.slow, victim)
	l.log.Info("straggler replaced", "job", j.ID, "worker", victim, "step_ms", speed[victim], "median_ms", med)
	_, _ = l.store.AppendEvent(ctx, j.ID, jobs.Event{Time: now, Type: jobs.EventWorker, Message: msg,
		Data: map[string]any{"worker": victim, "step_ms": speed[victim], "median_ms": med}})
	return nil
}

// median of a non-empty slice (sorted in place).
func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
