package core

import "time"

// RateWindow is the least span of steps a reported speed covers.
const RateWindow = time.Second

// Rate is the training speed a job's rank 0 reports: samples per second
// over at least RateWindow of steps of one generation. One step's rate is
// no measurement: on two loaded cores successive reports of one size
// differed by 4x, and a deadline planner re-planned on them (a one-worker
// job once reported 375,000 samples/s, ten times its speed). A window never spans a change
// of generation, so a speed is always one size's.
type Rate struct {
	gen     int64
	start   time.Time // the window's first step (zero: none yet)
	samples int64     // samples of the steps after start
	rate    float64
}

// Step records one applied step of n samples that ended at now in
// generation gen, and returns the speed to report: that of the newest
// full window of this generation (0 until there is one).
func (r *Rate) Step(now time.Time, gen, n int64) float64 {
	if r.start.IsZero() || gen != r.gen {
		// The first step of a generation only starts the window: when
		// it began is not known.
		*r = Rate{gen: gen, start: now}
		return 0
	}
	r.samples += n
	if el := now.Sub(r.start); el >= RateWindow {
		r.rate = float64(r.samples) / el.Seconds()
		r.start, r.samples = now, 0
	}
	return r.rate
}
