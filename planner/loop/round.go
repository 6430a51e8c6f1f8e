package loop

import (
	"context"
	"errors"
	"time"
)

// Round is one read -> decide -> apply pass. It is idempotent: after a
// partial failure the next round reads again and converges. Outside Run it
// takes (or renews) the lease first.
func (l *Loop) Round(ctx context.Context) error {
	_, err := l.round(ctx)
	return err
}

// round returns, besides errors, when the next round is due at the latest
// (a cooldown ending, a job to settle; zero: the interval).
func (l *Loop) round(ctx context.Context) (time.Time, error) {
	if _, err := l.writer(ctx); err != nil {
		return time.Time{}, err
	}
	w, errs, err := l.read(ctx)
	if err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	plan := decideRound(w, l.cfg, l.Fence())
	if l.cfg.OnDecide != nil {
		l.cfg.OnDecide(time.Since(start))
	}
	errs = append(errs, l.Apply(ctx, plan))
	l.rounds.Add(1)
	return plan.next, errors.Join(errs...)
}
