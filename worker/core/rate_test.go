package core

import (
	"math"
	"testing"
	"time"
)

func TestRateSpansAWindowOfOneGeneration(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r Rate
	if got := r.Step(t0, 1, 64); got != 0 {
		t.Fatalf("first step: %v, want 0 (nothing measured)", got)
	}
	// Steps of 64 samples alternating 10 ms and 90 ms: 1,280 samples/s on
	// average, 6,400 or 711 for one step.
	at, got := t0, 0.0
	for i := range 20 {
		d := 10 * time.Millisecond
		if i%2 == 1 {
			d = 90 * time.Millisecond
		}
		at = at.Add(d)
		got = r.Step(at, 1, 64)
		if at.Sub(t0) < RateWindow && got != 0 {
			t.Fatalf("step %d, %s in: %v before a full window", i, at.Sub(t0), got)
		}
	}
	if math.Abs(got-1280) > 1 {
		t.Errorf("after a window: %v samples/s, want 1280", got)
	}
	// A new generation starts again: its first window is its own.
	if got := r.Step(at.Add(time.Millisecond), 2, 64); got != 0 {
		t.Errorf("first step of generation 2: %v, want 0", got)
	}
	at = at.Add(time.Millisecond)
	for range 11 {
		at = at.Add(100 * time.Millisecond)
		got = r.Step(at, 2, 128)
	}
	if math.Abs(got-1280) > 1 {
		t.Errorf("generation 2: %v samples/s, want 1280 (128 a 100 ms step)", got)
	}
}
