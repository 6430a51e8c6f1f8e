package periodic

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestEveryAndPoll(t *testing.T) {
	for _, tc := range []struct {
		name      string
		run       func(context.Context, time.Duration, func() bool) error
		firstWait bool
	}{
		{"Every", Every, true},
		{"Poll", Poll, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const d = 40 * time.Millisecond
			start := time.Now()
			var first time.Duration
			calls := 0
			err := tc.run(context.Background(), d, func() bool {
				if calls == 0 {
					first = time.Since(start)
				}
				calls++
				return calls < 3
			})
			if err != nil || calls != 3 {
				t.Fatalf("stopped by f: err %v after %d calls; want nil after 3", err, calls)
			}
			if waited := first >= d; waited != tc.firstWait {
				t.Errorf("first call after %s; want it after the interval: %v", first, tc.firstWait)
			}
		})
	}
}

func TestEveryEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	calls := 0
	err := Every(ctx, 10*time.Millisecond, func() bool { calls++; return true })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Every = %v, want the context's error", err)
	}
	if calls == 0 {
		t.Error("f never ran within 5 intervals")
	}
}

func TestSleep(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 30*time.Millisecond); err != nil || time.Since(start) < 30*time.Millisecond {
		t.Errorf("Sleep = %v after %s; want nil after 30ms", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if err := Sleep(ctx, time.Minute); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("Sleep on an ended context = %v after %s; want Canceled at once", err, time.Since(start))
	}
}
