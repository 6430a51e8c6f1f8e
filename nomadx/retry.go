package nomadx

import (
	"context"
	"math/rand/v2"
	"time"

	bo "github.com/cenkalti/backoff/v5"
)

// backoff is the wait before reconnect n (n >= 1) of a blocking query
// (watch.go): BaseDelay doubled n-1 times, capped at MaxDelay, drawn
// uniformly from [d/2, d].
func backoff(r Retry, n int) time.Duration {
	d := r.BaseDelay
	for i := 1; i < n && d < r.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, r.MaxDelay)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// do runs one operation with retries (github.com/cenkalti/backoff/v5, as
// every retry in edl). Each try gets its own time-out and re-reads what it
// needs, so a try that failed half-way (a register that Nomad applied but
// whose answer was lost) is finished by the next one. An error that is not
// worth retrying (a 4xx, the caller's context ending) stops at once; when
// the context ends during a wait the last try's error is returned.
func (c *Cluster) do(ctx context.Context, op, nomadJob string, try func(ctx context.Context) error) error {
	r := c.cfg.Retry
	eb := &bo.ExponentialBackOff{InitialInterval: r.BaseDelay, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: r.MaxDelay}
	var last error
	_, err := bo.Retry(ctx, func() (struct{}, error) {
		tctx, cancel := context.WithTimeout(ctx, r.Timeout)
		err := try(tctx)
		cancel()
		last = err
		if err != nil && !retryable(ctx, err) {
			return struct{}{}, bo.Permanent(err)
		}
		return struct{}{}, err
	}, bo.WithBackOff(eb), bo.WithMaxTries(uint(max(r.Attempts, 1))), bo.WithMaxElapsedTime(0),
		bo.WithNotify(func(err error, wait time.Duration) {
			c.log.Debug("nomad retry", "op", op, "nomad_job", nomadJob, "wait", wait, "err", err)
		}))
	if err != nil && last != nil && ctx.Err() != nil {
		err = last
	}
	return wrap(op, nomadJob, err)
}
