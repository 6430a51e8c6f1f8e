package planner

import (
	"math"
	"slices"
)

// ScalingModel is the throughput of a data-parallel job with a fixed global
// batch as a function of its worker count n, in the style of Optimus and
// Pollux: a step takes compute/n plus a ring all-reduce, 2(n-1)/n of the
// gradient size over the link bandwidth, so
//
//	step time t(n) = B*Alpha/n + C*(n-1)/n
//	throughput T(n) = B/t(n) = n / (Alpha + Beta*(n-1)),  Beta = C/B
//
// Alpha is seconds per sample of compute on one worker, Beta the
// communication cost per sample. T grows with n but ever more slowly and
// levels off at 1/Beta: the marginal gain of a worker falls as a job grows,
// which is what lets Decide spread spare GPUs where they help most.
type ScalingModel struct {
	Alpha, Beta float64
}

// Throughput is the modelled samples/s at n workers (0 for n <= 0).
func (m ScalingModel) Throughput(n int) float64 {
	if n <= 0 {
		return 0
	}
	return float64(n) / (m.Alpha + m.Beta*float64(n-1))
}

// Speedup is T(n)/T(1).
func (m ScalingModel) Speedup(n int) float64 {
	if n <= 0 {
		return 0
	}
	return m.Throughput(n) * m.Alpha
}

// FitScalingModel fits the model to measured samples/s by worker count.
// With two or more distinct sizes it is a least-squares fit of the linear
// form n/T(n) = Alpha + Beta*(n-1); with one, Beta = commRatio*Alpha and
// Alpha matches the measurement; with none, Alpha = 1 and Beta = commRatio,
// so only relative figures (speedups) mean anything. Non-positive samples are
// ignored.
func FitScalingModel(measured map[int]float64, commRatio float64) ScalingModel {
	var n, sx, sy, sxx, sxy float64
	var n0 int
	var t0 float64
	// Sum in worker order: float addition is not associative, and Decide
	// must give the same answer for the same input.
	for _, w := range sortedKeys(measured) {
		t := measured[w]
		if w <= 0 || t <= 0 || math.IsNaN(t) || math.IsInf(t, 0) {
			continue
		}
		x, y := float64(w-1), float64(w)/t
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
		n0, t0 = w, t
	}
	switch {
	case n == 0:
		return ScalingModel{Alpha: 1, Beta: commRatio}
	case n == 1:
		a := float64(n0) / (t0 * (1 + commRatio*float64(n0-1)))
		return ScalingModel{Alpha: a, Beta: commRatio * a}
	}
	den := n*sxx - sx*sx
	var beta float64
	if den > 1e-12 {
		beta = (n*sxy - sx*sy) / den
	}
	if beta < 0 {
		beta = 0
	}
	alpha := (sy - beta*sx) / n
	if alpha <= 1e-12 {
		// Super-linear measurements: keep the mean cost per sample as
		// compute and call communication free.
		alpha, beta = sy/n, 0
		if alpha <= 1e-12 {
			alpha = 1e-12
		}
	}
	return ScalingModel{Alpha: alpha, Beta: beta}
}

// throughputEstimate answers T(n) for one job: a measurement when there is
// one at n, else the fitted model.
type throughputEstimate struct {
	model    ScalingModel
	measured map[int]float64
	ref      float64 // model T(1): the unit in which gains compare across jobs
}

func newEstimate(measured map[int]float64, commRatio float64) throughputEstimate {
	m := FitScalingModel(measured, commRatio)
	return throughputEstimate{model: m, measured: measured, ref: m.Throughput(1)}
}

func (e throughputEstimate) at(n int) float64 {
	if n <= 0 {
		return 0
	}
	if t, ok := e.measured[n]; ok && t > 0 {
		return t
	}
	return e.model.Throughput(n)
}

// speedup is T(n) in units of the modelled one-worker throughput.
func (e throughputEstimate) speedup(n int) float64 {
	return e.at(n) / e.ref
}

func sortedKeys(m map[int]float64) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
