package live

import (
	"fmt"

	"github.com/edl-nomad/edl/jobs"
)

// A live program reports metrics with ctx.report(...) (python/edl): op
// "report" carries the values, the applied step they belong to and the
// epochs done then. Rank 0's worker adds them to the job's metric log
// (jobs/jobmetrics) through the same core.MetricSink the built-in trainer
// and restart mode's $EDL_METRICS_FILE feed; the sweep controller judges
// trials by it. Every rank may call it (a program need not know which
// rank it is): the other ranks' values are dropped, kept false. A value
// that is NaN or infinite (a diverged loss: a real observation, which a
// sweep judges as the worst there is) travels in "non_finite" by name,
// as JSON has no such numbers.

// Bounds of one report.
const (
	reportMaxValues  = 64
	reportMaxNameLen = 64
)

// liveReport answers a report; a bad one is answered with an error naming
// what is wrong (the program raises it), never a crash.
func (w *Worker) liveReport(req liveRequest) liveReply {
	vals, err := reportValues(req)
	if err != nil {
		return liveReply{Error: "report: " + err.Error()}
	}
	if w.g == nil || w.g.Rank(w.Cfg.Worker) != 0 {
		return liveReply{}
	}
	w.met.Add(req.Step, req.Epoch, vals)
	return liveReply{Kept: true}
}

// reportValues are a report's values, the finite and the non-finite ones
// together, or an error naming what is wrong with the report.
func reportValues(req liveRequest) (map[string]float64, error) {
	n := len(req.Values) + len(req.NonFinite)
	switch {
	case n == 0:
		return nil, fmt.Errorf("no values")
	case n > reportMaxValues:
		return nil, fmt.Errorf("%d values, at most %d", n, reportMaxValues)
	case req.Step < 0:
		return nil, fmt.Errorf("step %d: want >= 0", req.Step)
	case req.Epoch < 0:
		return nil, fmt.Errorf("epoch %d: want >= 0", req.Epoch)
	}
	vals := make(map[string]float64, n)
	for k, v := range req.Values {
		vals[k] = v
	}
	for k, name := range req.NonFinite {
		if _, dup := vals[k]; dup {
			return nil, fmt.Errorf("metric %q: both in values and in non_finite", k)
		}
		v, err := jobs.ParseNonFinite(name)
		if err != nil {
			return nil, fmt.Errorf("metric %q: %w", k, err)
		}
		vals[k] = v
	}
	for k := range vals {
		if k == "" || len(k) > reportMaxNameLen {
			return nil, fmt.Errorf("metric name %q: want 1-%d characters", k, reportMaxNameLen)
		}
	}
	return vals, nil
}
