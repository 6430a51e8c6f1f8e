package bench

import (
	"context"
	"math"
	"strings"
	"testing"
)

func TestLiveStall(t *testing.T) {
	steps := func(xs ...[3]float64) []liveBenchStep {
		var out []liveBenchStep
		for _, x := range xs {
			out = append(out, liveBenchStep{at: x[0], gen: int64(x[1]), applied: int64(x[2])})
		}
		return out
	}
	tests := []struct {
		name        string
		s           []liveBenchStep
		stall, step float64
		redone      int64
	}{
		{"join: one long gap at the switch", steps([3]float64{0, 1, 0}, [3]float64{0.1, 1, 1}, [3]float64{0.2, 1, 2}, [3]float64{0.5, 2, 3}, [3]float64{0.6, 2, 4}), 0.2, 0.1, 0},
		{"kill: the discarded step is printed twice, nothing redone", steps([3]float64{0, 1, 5}, [3]float64{0.1, 1, 6}, [3]float64{0.2, 1, 7}, [3]float64{1.2, 2, 7}, [3]float64{1.3, 2, 8}), 0.9, 0.1, 0},
		{"rolled back one step", steps([3]float64{0, 1, 5}, [3]float64{0.1, 1, 6}, [3]float64{0.2, 1, 7}, [3]float64{0.4, 2, 6}), 0.1, 0.1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stall, redone, step := liveStall(tc.s, 1)
			if math.Abs(stall-tc.stall) > 1e-9 || redone != tc.redone || math.Abs(step-tc.step) > 1e-9 {
				t.Errorf("liveStall = %.3f, %d, %.3f; want %.3f, %d, %.3f", stall, redone, step, tc.stall, tc.redone, tc.step)
			}
		})
	}
}

func TestBenchTorchLiveRejectsBadScenarios(t *testing.T) {
	for _, c := range []liveBenchConfig{{Scenario: "resize"}, {Scenario: "kill", Workers: 1}} {
		if _, err := benchTorchLive(context.Background(), c); err == nil || !strings.Contains(err.Error(), "live bench") {
			t.Errorf("%+v: err %v, want a live bench error", c, err)
		}
	}
}
