package nomadx

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is the wait before try n (n >= 1): BaseDelay doubled n-1 times,
// capped at MaxDelay, drawn uniformly from [d/2, d].
func backoff(r Retry, n int) time.Duration {
	d := r.BaseDelay
	for i := 1; i < n && d < r.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, r.MaxDelay)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// do runs one operation with retries. Each try gets its own time-out and
// re-reads what it needs, so a try that failed half-way (a register that
// Nomad applied but whose answer was lost) is finished by the next one.
func (c *Cluster) do(ctx context.Context, op, nomadJob string, try func(ctx context.Context) error) error {
	var err error
	for n := 0; n < c.cfg.Retry.Attempts; n++ {
		if n > 0 {
			d := backoff(c.cfg.Retry, n)
			c.log.Debug("nomad retry", "op", op, "nomad_job", nomadJob, "attempt", n+1, "wait", d, "err", err)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return wrap(op, nomadJob, err)
			case <-t.C:
			}
		}
		tctx, cancel := context.WithTimeout(ctx, c.cfg.Retry.Timeout)
		err = try(tctx)
		cancel()
		if err == nil || !retryable(ctx, err) {
			break
		}
	}
	return wrap(op, nomadJob, err)
}
