package planner

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// MinServiceHistory is how many finished jobs a ServiceHistory needs before
// Decide ranks by it; with fewer it ranks by least attained service.
const MinServiceHistory = 20

// Gittins grid: the index is tabulated at attained service 0 and at
// gittinsGridStart * gittinsGridFactor^k GPU seconds up to the largest
// finished job's service.
const (
	gittinsGridStart  = 60
	gittinsGridFactor = 1.15
)

// ServiceHistory is the service (GPU seconds; worker seconds for CPU-only
// jobs) that the cluster's finished jobs received, summarised as a Gittins
// index over attained service: Tiresias' discretised Gittins policy, learnt
// online from jobs that have already finished (nothing about a live job's
// future). Live jobs may be added as censored observations (they need at
// least what they have attained): the Kaplan-Meier estimate then corrects
// the history's bias toward short jobs, which finish first. It is
// immutable once built; build it with NewServiceHistory.
type ServiceHistory struct {
	n    int
	grid []float64 // attained service, ascending; grid[0] = 0
	rank []float64 // 1/index at each grid point: GPU seconds per expected completion
	max  float64   // the largest finished job's service
}

// NewServiceHistory summarises the service of finished jobs and,
// optionally, the attained service of live ones (censored: nil for none).
// Every finished value must be a positive finite number, every live one a
// non-negative finite number.
func NewServiceHistory(finished, live []float64) (*ServiceHistory, error) {
	if len(finished) == 0 {
		return nil, errors.New("service history: no finished jobs")
	}
	for i, v := range finished {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("service history: finished job %d: service %g: must be a positive finite number", i, v)
		}
	}
	for i, v := range live {
		if !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("service history: live job %d: attained service %g: must be a non-negative finite number", i, v)
		}
	}
	// Both in ascending service: a caller that keeps finished sorted (a
	// simulator, whose history only grows) pays no sort of it.
	if !slices.IsSorted(finished) {
		finished = slices.Sorted(slices.Values(finished))
	}
	live = slices.Sorted(slices.Values(live))
	// Kaplan-Meier: the mass of each finished value, and what is left
	// beyond the last one (live jobs that outlived every finished one). At
	// a value both finished and live jobs hold, the finished ones were at
	// risk before the ones censored there.
	vals, mass := make([]float64, 0, len(finished)), make([]float64, 0, len(finished))
	surv, atRisk := 1.0, float64(len(finished)+len(live))
	for i, j := 0, 0; i < len(finished) || j < len(live); {
		v := math.Inf(1)
		if i < len(finished) {
			v = finished[i]
		}
		if j < len(live) {
			v = min(v, live[j])
		}
		d, c := 0, 0
		for ; i < len(finished) && finished[i] == v; i++ {
			d++
		}
		for ; j < len(live) && live[j] == v; j++ {
			c++
		}
		if d > 0 {
			m := surv * float64(d) / atRisk
			vals, mass = append(vals, v), append(mass, m)
			surv -= m
		}
		atRisk -= float64(d + c)
	}
	tail := max(surv, 0)
	pm := make([]float64, len(vals)+1) // prefix sums of mass
	pv := make([]float64, len(vals)+1) // prefix sums of mass * value
	for i := range vals {
		pm[i+1] = pm[i] + mass[i]
		pv[i+1] = pv[i] + mass[i]*vals[i]
	}
	h := &ServiceHistory{n: len(finished), max: vals[len(vals)-1]}
	for a := 0.0; a < h.max; {
		h.grid = append(h.grid, a)
		if a == 0 {
			a = gittinsGridStart
		} else {
			a *= gittinsGridFactor
		}
	}
	h.rank = gittinsRanks(vals, pm, pv, tail, h.grid)
	return h, nil
}

// gittinsRanks is 1/G(a) at each grid point a (ascending, each below the
// last value), where G is the Gittins index of the distribution with masses
// at vals (sorted, with prefix sums pm of mass and pv of mass x value) and
// tail mass beyond them:
//
//	G(a) = max over quanta d of P(S-a <= d | S > a) / E[min(S-a, d) | S > a].
//
// Its inverse is the GPU seconds a job that has attained a is expected to
// use per completion it buys: lower is better. The quanta worth trying end
// at a value, vals[k] - a for k >= i (the first value above a); with mass
// done = pm[k+1]-pm[i] finishing and alive = pm[n]-pm[i]+tail at risk,
//
//	spent(k) = pv[k+1]-pv[i] - done*a + (alive-done)*(vals[k]-a)
//	         = g[k] - (pv[i] + a*alive),  g[k] = pv[k+1] + (total-pm[k+1])*vals[k],
//
// with total = pm[n]+tail. So spent(k)/done(k) is the slope from the point
// (pm[i], pv[i]+a*alive) to the point (pm[k+1], g[k]), and its minimum over
// k >= i is where the line from that point touches the lower convex hull of
// the points k >= i: found by bisection on the hull, which grows leftwards
// as the grid is walked down. A rebuild of a history of n values costs
// O(n + grid x log n) instead of O(grid x n): a simulator rebuilds it at
// every job completion.
func gittinsRanks(vals, pm, pv []float64, tail float64, grid []float64) []float64 {
	n := len(vals)
	total := pm[n] + tail
	xs, ys := pm[1:], make([]float64, n)
	for k, v := range vals {
		ys[k] = pv[k+1] + (total-pm[k+1])*v
	}
	// turn is the z of (b-o) x (c-o): > 0 when o, b, c turn left.
	turn := func(ox, oy float64, b, c int) float64 {
		return (xs[b]-ox)*(ys[c]-oy) - (ys[b]-oy)*(xs[c]-ox)
	}
	hull := make([]int, 0, n) // lower hull, rightmost first: hull[len-1] is leftmost
	ranks := make([]float64, len(grid))
	next := n // the points k >= next are in hull
	for g := len(grid) - 1; g >= 0; g-- {
		a := grid[g]
		i := sort.SearchFloat64s(vals, math.Nextafter(a, math.Inf(1))) // first value > a
		for next > i {
			next--
			for len(hull) >= 2 && turn(xs[next], ys[next], hull[len(hull)-1], hull[len(hull)-2]) <= 0 {
				hull = hull[:len(hull)-1]
			}
			hull = append(hull, next)
		}
		alive := pm[n] - pm[i] + tail
		if !(xs[i] > pm[i]) { // no mass at the first value (underflow): no slope to bisect
			ranks[g] = gittinsRankOver(vals, pm, pv, alive, a, i, i, n-1)
			continue
		}
		qx, qy := pm[i], pv[i]+a*alive
		// Seen from q, left of every point, the slope to the hull's
		// vertices falls then rises: the first vertex whose successor is no
		// lower in slope is the minimum.
		m := len(hull)
		j := sort.Search(m-1, func(j int) bool {
			return turn(qx, qy, hull[m-1-j], hull[m-2-j]) >= 0
		})
		k := hull[m-1-j]
		ranks[g] = gittinsRankOver(vals, pm, pv, alive, a, i, k, k)
	}
	return ranks
}

// gittinsRankOver is the least expected service per completion, for a
// job that has attained a, over the quanta that end at vals[lo..hi], with
// i the first value above a (lo >= i) and alive the mass beyond a.
func gittinsRankOver(vals, pm, pv []float64, alive, a float64, i, lo, hi int) float64 {
	best := math.Inf(1)
	for k := lo; k <= hi; k++ {
		d := vals[k] - a
		done := pm[k+1] - pm[i]
		spent := pv[k+1] - pv[i] - done*a + (alive-done)*d
		if r := spent / done; r < best {
			best = r
		}
	}
	return best
}

// Len is the number of finished jobs the history holds.
func (h *ServiceHistory) Len() int {
	if h == nil {
		return 0
	}
	return h.n
}

// Rank is the Gittins rank of a job that has attained this much service
// (GPU seconds per expected completion; lower runs first). Past every
// finished job's service the history says nothing, and the job is assumed
// to need as much again as it has had (its attained service).
func (h *ServiceHistory) Rank(attained float64) float64 {
	if attained >= h.max {
		return max(attained, h.rank[len(h.rank)-1])
	}
	k := sort.SearchFloat64s(h.grid, math.Nextafter(attained, math.Inf(1))) - 1
	return h.rank[max(k, 0)]
}

// NextChange is the attained service, above attained, at which a job's
// queue under cfg's Gittins order (the first attained-service queue, then
// Gittins ranks: Config.GittinsThreshold) next changes; +Inf if it never
// does. A simulator uses it as an event.
func (h *ServiceHistory) NextChange(cfg Config, attained float64) float64 {
	if fq := cfg.firstQueue(); attained < fq {
		return fq
	}
	q := cfg.gittinsQueue(h.Rank(attained))
	k := sort.SearchFloat64s(h.grid, math.Nextafter(attained, math.Inf(1)))
	for ; k < len(h.grid); k++ {
		if cfg.gittinsQueue(h.rank[k]) != q {
			return h.grid[k]
		}
	}
	// Past the last grid point the rank is the attained service itself
	// (from h.max on) until it leaves the last queue's bound.
	a := math.Max(attained, h.max)
	if a > attained && cfg.gittinsQueue(h.Rank(a)) != q {
		return a
	}
	b := cfg.gittinsBound(cfg.gittinsQueue(h.Rank(a)))
	if math.IsInf(b, 1) {
		return b
	}
	return math.Max(b, math.Nextafter(a, math.Inf(1)))
}
