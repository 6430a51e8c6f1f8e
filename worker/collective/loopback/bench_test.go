package loopback

import "testing"

func TestResultFrom(t *testing.T) {
	tests := []struct {
		name             string
		procs, mib       int
		times            []float64
		wantP50, wantAlg float64
		wantBus          float64
	}{
		{"odd count", 2, 64, []float64{50, 40, 100}, 50, 1.342, 1.342},
		{"even count, four procs", 4, 1, []float64{1, 3, 2, 4}, 2.5, 0.419, 0.629},
		{"too fast to time", 2, 1, []float64{0}, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := resultFrom(tc.procs, tc.mib, tc.times)
			if r.P50MS != tc.wantP50 || r.AlgBWGbps != tc.wantAlg || r.BusBWGbps != tc.wantBus || r.Iters != len(tc.times) {
				t.Fatalf("got p50 %v alg %v bus %v iters %d, want %v %v %v %d", r.P50MS, r.AlgBWGbps, r.BusBWGbps, r.Iters, tc.wantP50, tc.wantAlg, tc.wantBus, len(tc.times))
			}
		})
	}
}
