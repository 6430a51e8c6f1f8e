package planner

import (
	"math"
	"testing"
)

func TestFitScalingModel(t *testing.T) {
	truth := ScalingModel{Alpha: 0.01, Beta: 0.0007}
	tests := []struct {
		name     string
		measured map[int]float64
		check    func(t *testing.T, m ScalingModel)
	}{
		{
			name:     "no measurements: unit model with the default ratio",
			measured: nil,
			check: func(t *testing.T, m ScalingModel) {
				if m.Alpha != 1 || m.Beta != 0.05 {
					t.Errorf("model %+v, want {1 0.05}", m)
				}
			},
		},
		{
			name:     "one measurement: matched at that size",
			measured: map[int]float64{4: 300},
			check: func(t *testing.T, m ScalingModel) {
				if got := m.Throughput(4); math.Abs(got-300) > 1e-9 {
					t.Errorf("T(4) = %g, want 300", got)
				}
				if math.Abs(m.Beta/m.Alpha-0.05) > 1e-12 {
					t.Errorf("ratio %g, want 0.05", m.Beta/m.Alpha)
				}
			},
		},
		{
			name:     "exact samples of the model: parameters recovered",
			measured: map[int]float64{1: truth.Throughput(1), 2: truth.Throughput(2), 8: truth.Throughput(8)},
			check: func(t *testing.T, m ScalingModel) {
				if math.Abs(m.Alpha-truth.Alpha) > 1e-9 || math.Abs(m.Beta-truth.Beta) > 1e-9 {
					t.Errorf("fit %+v, want %+v", m, truth)
				}
			},
		},
		{
			name:     "super-linear samples: communication taken as free",
			measured: map[int]float64{1: 100, 2: 250},
			check: func(t *testing.T, m ScalingModel) {
				if m.Beta != 0 || m.Alpha <= 0 {
					t.Errorf("fit %+v, want Beta 0 and positive Alpha", m)
				}
			},
		},
		{
			name:     "non-positive samples ignored",
			measured: map[int]float64{0: 5, 2: -1, 3: math.NaN()},
			check: func(t *testing.T, m ScalingModel) {
				if m.Alpha != 1 {
					t.Errorf("fit %+v, want the unit model", m)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, FitScalingModel(tc.measured, 0.05)) })
	}
}

func TestScalingModelDiminishingReturns(t *testing.T) {
	m := ScalingModel{Alpha: 1, Beta: 0.05}
	prevGain := math.Inf(1)
	for n := 1; n < 64; n++ {
		g := m.Throughput(n+1) - m.Throughput(n)
		if g <= 0 || g > prevGain {
			t.Fatalf("n=%d: gain %g after %g; want positive and falling", n, g, prevGain)
		}
		prevGain = g
	}
	if s := m.Speedup(8); math.Abs(s-8/1.35) > 1e-12 {
		t.Errorf("Speedup(8) = %g, want %g", s, 8/1.35)
	}
}
