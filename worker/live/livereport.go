package live

import "fmt"

// A live program reports metrics with ctx.report(...) (python/edl): op
// "report" carries the values, the applied step they belong to and the
// epochs done then. Rank 0's worker adds them to the job's metric log
// (jobs/jobmetrics) through the same core.MetricSink the built-in trainer
// and restart mode's $EDL_METRICS_FILE feed; the sweep controller judges
// trials by it. Every rank may call it (a program need not know which
// rank it is): the other ranks' values are dropped, kept false.

// Bounds of one report.
const (
	reportMaxValues  = 64
	reportMaxNameLen = 64
)

// liveReport answers a report; a bad one is answered with an error naming
// what is wrong (the program raises it), never a crash.
func (w *Worker) liveReport(req liveRequest) liveReply {
	if err := checkReport(req); err != nil {
		return liveReply{Error: "report: " + err.Error()}
	}
	if w.g == nil || w.g.Rank(w.Cfg.Worker) != 0 {
		return liveReply{}
	}
	vals := make(map[string]float64, len(req.Values))
	for k, v := range req.Values {
		vals[k] = v
	}
	w.met.Add(req.Step, req.Epoch, vals)
	return liveReply{Kept: true}
}

func checkReport(req liveRequest) error {
	switch {
	case len(req.Values) == 0:
		return fmt.Errorf("no values")
	case len(req.Values) > reportMaxValues:
		return fmt.Errorf("%d values, at most %d", len(req.Values), reportMaxValues)
	case req.Step < 0:
		return fmt.Errorf("step %d: want >= 0", req.Step)
	case req.Epoch < 0:
		return fmt.Errorf("epoch %d: want >= 0", req.Epoch)
	}
	for k := range req.Values {
		if k == "" || len(k) > reportMaxNameLen {
			return fmt.Errorf("metric name %q: want 1-%d characters", k, reportMaxNameLen)
		}
	}
	return nil
}
