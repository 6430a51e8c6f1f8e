package periodic

import (
	"context"
	"time"
)

// Every calls f once every d, the first time after d, until ctx ends (it
// returns ctx.Err()) or f returns false (it returns nil).
func Every(ctx context.Context, d time.Duration, f func() bool) error {
	return loop(ctx, d, false, f)
}

// Poll is Every with the first call at once: check, then wait.
func Poll(ctx context.Context, d time.Duration, f func() bool) error {
	return loop(ctx, d, true, f)
}

func loop(ctx context.Context, d time.Duration, now bool, f func() bool) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if now && !f() {
			return nil
		}
		now = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
