package sweep

import (
	"math"
	"sort"

	"github.com/edl-nomad/edl/jobs"
)

// Verdict is ASHA's answer for a trial's result at a rung.
type Verdict int

const (
	Promote  Verdict = iota // it goes on to the next rung
	Cut                     // it stops here
	Complete                // the rung was the last: it is done
)

func (v Verdict) String() string {
	return [...]string{"promote", "cut", "complete"}[v]
}

// Judge is ASHA's rule (as Ray Tune's ASHAScheduler applies it): a result
// at the last rung completes the trial; at another rung it is cut when it
// is worse than the (1 - 1/rf) quantile of the results recorded there
// before it (for "max"; the 1/rf quantile for "min"), and goes on
// otherwise, the first result at a rung included.
//
// A non-finite result (NaN, +Inf or -Inf: a diverged loss) is the worst
// there is in either mode: it is cut at any rung, the first at a rung and
// the last rung included (as Optuna's pruners prune a NaN at once). A
// non-finite result recorded before counts as the worst value in the
// quantile.
func Judge(sc Scheduler, m Metric, rung int, recorded []float64, value float64) Verdict {
	if !jobs.Finite(value) {
		return Cut
	}
	if rung >= len(sc.Milestones())-1 {
		return Complete
	}
	if len(recorded) == 0 {
		return Promote
	}
	rf := float64(max(sc.ReductionFactor, 2))
	q := 1 - 1/rf
	if m.Mode != Max {
		q = 1 / rf
	}
	worst := math.Inf(1)
	if m.Mode == Max {
		worst = math.Inf(-1)
	}
	vs := make([]float64, len(recorded))
	for i, v := range recorded {
		if !jobs.Finite(v) {
			v = worst
		}
		vs[i] = v
	}
	cutoff := quantile(vs, q)
	if m.Better(cutoff, value) {
		return Cut
	}
	return Promote
}

// quantile is numpy's default (linear) percentile of vs at q in [0, 1];
// vs may hold infinities (the worst values), never NaN.
func quantile(vs []float64, q float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	switch {
	case s[lo] == s[hi]:
		return s[lo]
	case math.IsInf(s[hi], 1):
		return s[hi] // between a number and +Inf: +Inf (Inf x 0 would be NaN)
	case math.IsInf(s[lo], -1):
		return s[lo]
	}
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// RungValue is a trial's metric at a milestone: the mean of its values
// reported at steps in (milestone-window, milestone], which evens out a
// per-step loss; with none there, the first value reported after it. A
// non-finite value in the window makes the mean non-finite (NaN, or the
// infinity): the trial diverged there. ok
// is false until the trial reported a step at or past the milestone.
// points are in step order.
func RungValue(points []Point, milestone, window int64) (float64, bool) {
	if len(points) == 0 || points[len(points)-1].Step < milestone {
		return 0, false
	}
	sum, n := 0.0, 0
	for _, p := range points {
		if p.Step > milestone-window && p.Step <= milestone {
			sum += p.Value
			n++
		}
	}
	if n > 0 {
		return sum / float64(n), true
	}
	for _, p := range points {
		if p.Step >= milestone {
			return p.Value, true
		}
	}
	return 0, false
}

// Window is the steps RungValue averages over: half the grace period.
func (s Scheduler) Window() int64 { return max(1, (s.Grace+1)/2) }
