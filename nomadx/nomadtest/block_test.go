package nomadtest

import (
	"testing"
	"time"
)

// Nomad's servers bound a blocking query's wait at 5 minutes (also the
// default) and add a stagger of up to wait/16.
func TestBlockFor(t *testing.T) {
	for _, c := range []struct {
		wait     string
		min, max time.Duration
	}{
		{"", 5 * time.Minute, 5*time.Minute + 5*time.Minute/16},
		{"bogus", 5 * time.Minute, 5*time.Minute + 5*time.Minute/16},
		{"1600ms", 1600 * time.Millisecond, 1700 * time.Millisecond},
		{"10m", 5 * time.Minute, 5*time.Minute + 5*time.Minute/16},
		{"300000ms", 5 * time.Minute, 5*time.Minute + 5*time.Minute/16},
	} {
		for range 50 {
			if got := blockFor(c.wait); got < c.min || got > c.max {
				t.Fatalf("blockFor(%q) = %s, want in [%s, %s]", c.wait, got, c.min, c.max)
			}
		}
	}
}
