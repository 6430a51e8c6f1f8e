package planner

import "math"

// profile is the capacity left over time while deadline jobs are planned:
// segment i has free units from its t until the next segment's t (the last
// one until forever); t is seconds from now.
type profile []segment

type segment struct {
	t    float64
	free int
}

// piece is a stretch of time a job runs at one size.
type piece struct {
	from, to float64
	workers  int
}

// run plays a job with work left at size index i of c through the profile
// (without taking anything): in each segment it runs at the largest usable
// size up to c.sizes[i] that fits, and every change of size (its start
// included) stalls it cost seconds, plus latency for a change after now (it
// happens at the next decision). A job that already runs at the size of
// the first piece (current) pays only what is left of its last resize's
// stall, which began since seconds ago. It returns when the work is done
// (+Inf: never) and the pieces.
func (p profile) run(c speedCurve, i, units int, work, cost, latency float64, current int, since float64) (float64, []piece) {
	var pieces []piece
	prev, stall, done := current, max(cost-since, 0), 0.0
	for k, sg := range p {
		end := math.Inf(1)
		if k+1 < len(p) {
			end = p[k+1].t
		}
		w, rate := 0, 0.0
		if li := c.level(c.sizes[i], sg.free/units); li >= 0 {
			w, rate = c.sizes[li], c.rates[li]
		}
		if w != prev {
			stall = 0
			if w > 0 {
				stall = cost
				if sg.t > 0 {
					stall += latency
				}
			}
			prev = w
		}
		if w == 0 {
			continue
		}
		start := sg.t + stall
		if start >= end {
			stall -= end - sg.t
			pieces = append(pieces, piece{from: sg.t, to: end, workers: w})
			continue
		}
		stall = 0
		if need := (work - done) / rate; start+need <= end {
			f := start + need
			pieces = append(pieces, piece{from: sg.t, to: f, workers: w})
			return f, pieces
		}
		done += (end - start) * rate
		pieces = append(pieces, piece{from: sg.t, to: end, workers: w})
	}
	return math.Inf(1), pieces
}

// take removes units from the free capacity between from and to.
func (p *profile) take(from, to float64, units int) {
	if units <= 0 || !(to > from) {
		return
	}
	p.split(from)
	if !math.IsInf(to, 1) {
		p.split(to)
	}
	for k := range *p {
		if sg := &(*p)[k]; sg.t >= from && sg.t < to {
			sg.free -= units
		}
	}
}

// split makes t a segment boundary.
func (p *profile) split(t float64) {
	s := *p
	for k := range s {
		if s[k].t == t {
			return
		}
		if s[k].t > t {
			// t lies in segment k-1 (k > 0: the first segment starts at 0
			// and t >= 0).
			*p = append(s[:k], append(profile{{t: t, free: s[k-1].free}}, s[k:]...)...)
			return
		}
	}
	*p = append(s, segment{t: t, free: s[len(s)-1].free})
}
