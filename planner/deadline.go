package planner

import (
	"math"
	"slices"
	"time"
)

// Deadline is what a job with a deadline adds to its JobState: the user
// gave the job and a time, the planner picks the workers. Admit decides
// whether a new one is taken; Decide reserves every deadline job's planned
// share before the rest of the policy runs (deadline_decide.go).
type Deadline struct {
	// At is when the job must be done.
	At time.Time
	// BestEffort jobs are admitted whether or not they fit and are planned
	// after every strict one; strict jobs (the default) are admitted only
	// with a plan that finishes them by At.
	BestEffort bool
	// Remaining is the work left, in the unit of JobState.Throughput
	// (samples; steps for exec jobs, whose throughput is steps/s).
	Remaining float64
	// Share is the worker count the job was planned at last round (0:
	// none). Planning never gives it less, so a plan once found feasible
	// stays feasible while jobs progress as planned.
	Share int
	// Sizes, when not empty, are the only worker counts the job may run
	// at (ElasticFlow's power-of-two levels); else any count 1..Max.
	Sizes []int
	// PriorSamplesPerS is one worker's speed assumed until the job has a
	// measurement; with none and no prior the job cannot be planned.
	PriorSamplesPerS float64
}

// speedCurve is a deadline job's usable sizes and its speed at each: only
// efficient sizes, each strictly faster than every smaller one (a size that
// is no faster than a smaller one only wastes GPUs).
type speedCurve struct {
	sizes []int
	rates []float64 // work/s at sizes[i]
}

// curveOf builds the curve from the job's measurements, the prior and the
// scaling model (see throughputAt).
func curveOf(j *JobState, commRatio float64) speedCurve {
	d := j.Deadline
	hi := max(j.Max, 1)
	var cands []int
	if len(d.Sizes) > 0 {
		for _, n := range d.Sizes {
			if n >= 1 && n <= hi {
				cands = append(cands, n)
			}
		}
		slices.Sort(cands)
		cands = slices.Compact(cands)
	} else {
		for n := 1; n <= hi; n++ {
			cands = append(cands, n)
		}
	}
	var c speedCurve
	best := 0.0
	for _, n := range cands {
		r := throughputAt(j.Throughput, d.PriorSamplesPerS, commRatio, n)
		if r > best*(1+1e-9) && !math.IsInf(r, 0) && !math.IsNaN(r) {
			c.sizes = append(c.sizes, n)
			c.rates = append(c.rates, r)
			best = r
		}
	}
	return c
}

// throughputAt is the speed (work/s) of a job at n workers: a measurement
// when there is one at n; between two measured sizes the straight line
// between them; beyond them the scaling model fitted to the measurements
// (FitScalingModel), scaled to pass through the nearest one; before any
// measurement the model with prior one-worker speed prior and the
// configured communication ratio. 0 when nothing is known.
func throughputAt(measured map[int]float64, prior, commRatio float64, n int) float64 {
	var ks []int
	for _, k := range sortedKeys(measured) {
		if t := measured[k]; k > 0 && t > 0 && !math.IsInf(t, 0) && !math.IsNaN(t) {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		if prior <= 0 {
			return 0
		}
		return ScalingModel{Alpha: 1 / prior, Beta: commRatio / prior}.Throughput(n)
	}
	if t, ok := measured[n]; ok && t > 0 {
		return t
	}
	i, _ := slices.BinarySearch(ks, n)
	if i > 0 && i < len(ks) {
		a, b := ks[i-1], ks[i]
		ta, tb := measured[a], measured[b]
		return ta + (tb-ta)*float64(n-a)/float64(b-a)
	}
	m := FitScalingModel(measured, commRatio)
	near := ks[0]
	if i == len(ks) {
		near = ks[len(ks)-1]
	}
	return m.Throughput(n) * measured[near] / m.Throughput(near)
}

// level is the largest usable size at most n that fits in free workers,
// as an index into c.sizes (-1: none).
func (c speedCurve) level(n, free int) int {
	k := min(n, free)
	i, found := slices.BinarySearch(c.sizes, k)
	if found {
		return i
	}
	return i - 1
}

// floorIndex is the index of the largest usable size at most share (-1 when
// there is none: no floor).
func (c speedCurve) floorIndex(share int) int {
	if share <= 0 {
		return -1
	}
	return c.level(share, share)
}

// upTo is the curve without the sizes above n.
func (c speedCurve) upTo(n int) speedCurve {
	i := c.level(n, n) + 1
	return speedCurve{sizes: c.sizes[:i], rates: c.rates[:i]}
}
