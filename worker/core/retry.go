package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// Retry intervals of the worker's writes to Redis: short, because Redis is
// usually away only for a moment and the ring waits for the step.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = time.Second
)

// newBackOff is the worker's one retry schedule: exponential from
// retryFirst to retryMax, with jitter so that a job's workers coming back
// together do not hit Redis in lock step.
func newBackOff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: retryFirst, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: retryMax}
}

// permanent reports errors that waiting will not cure.
func permanent(err error) bool {
	return errors.Is(err, datapipe.ErrStaleGeneration) || errors.Is(err, coord.ErrStaleReport) ||
		errors.Is(err, jobs.ErrInvalidTransition)
}

// Retry runs f until it succeeds, fails permanently, or ctx ends, backing
// off: Redis may be briefly away. It is bounded by ctx only; callers that
// must not wait for ever pass a deadline.
func Retry(ctx context.Context, log *slog.Logger, what string, f func() error) error {
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := f()
		if err != nil && permanent(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		last = err
		return struct{}{}, err
	}, backoff.WithBackOff(newBackOff()), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, next time.Duration) { log.Debug(what+" failed, retrying", "err", err, "in", next) }))
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && last != nil:
		return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), last)
	}
	return fmt.Errorf("%s: %w", what, err)
}
