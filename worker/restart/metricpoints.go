package restart

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/edl-nomad/edl/worker/core"
)

// An exec program in restart mode reports metrics by appending JSON lines
// to $EDL_METRICS_FILE, one object per line with an integer "step", an
// optional integer "epoch" and its metrics as numbers:
//
//	{"step": 120, "loss": 0.53, "val_loss": 0.61}
//
// The worker follows the file (it survives the program's restarts: the
// worker keeps its offset) and sends each line to the job's metric log
// (jobs/jobmetrics). A line that is not such an object is an error event
// of the job (the first few), never a crash of anything.

const (
	metricsFilePoll  = 250 * time.Millisecond
	metricsMaxLine   = 64 << 10
	metricsBadEvents = 5 // bad lines reported as events, then one summary
)

// parseMetricLine reads one line of $EDL_METRICS_FILE.
func parseMetricLine(line []byte) (jobmetrics.Point, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return jobmetrics.Point{}, errors.New("not a JSON object")
	}
	var p jobmetrics.Point
	s, ok := raw["step"]
	if !ok {
		return p, errors.New(`no "step"`)
	}
	if err := json.Unmarshal(s, &p.Step); err != nil || p.Step < 0 {
		return p, errors.New(`"step" must be a non-negative integer`)
	}
	if e, ok := raw["epoch"]; ok {
		if err := json.Unmarshal(e, &p.Epoch); err != nil || p.Epoch < 0 {
			return p, errors.New(`"epoch" must be a non-negative integer`)
		}
	}
	p.Values = map[string]float64{}
	for k, v := range raw {
		if k == "step" || k == "epoch" {
			continue
		}
		var x float64
		if err := json.Unmarshal(v, &x); err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return p, fmt.Errorf("%q must be a number", k)
		}
		p.Values[k] = x
	}
	return p, nil
}

// pointSink takes the metric points (core.MetricSink).
type pointSink interface {
	Add(step int64, epoch int, values map[string]float64)
}

// metricsFile follows one program's metrics file.
type metricsFile struct {
	mu    sync.Mutex // read runs on a ticker and once more at the end
	path  string
	sink  pointSink
	rank0 func() bool // only rank 0's lines go to the job's metric log
	rep   *core.Reporter
	off   int64
	line  int
	bad   int
	buf   []byte
}

func (f *metricsFile) run(ctx context.Context) {
	t := time.NewTicker(metricsFilePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.read()
			return
		case <-t.C:
		}
		f.read()
	}
}

// read takes in the lines appended since the last read; a file that
// shrank (the program truncated it) is read again from its start.
func (f *metricsFile) read() {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.Open(f.path)
	if err != nil {
		return // not written yet
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Size() < f.off {
		f.off, f.buf = 0, nil
	}
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return
	}
	chunk, err := io.ReadAll(io.LimitReader(fh, 16<<20))
	if err != nil {
		return
	}
	f.off += int64(len(chunk))
	f.buf = append(f.buf, chunk...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			if len(f.buf) > metricsMaxLine {
				f.line++
				f.report(fmt.Errorf("longer than %d bytes", metricsMaxLine))
				f.buf = nil
			}
			return
		}
		line := bytes.TrimSpace(f.buf[:i])
		f.buf = f.buf[i+1:]
		f.line++
		if len(line) == 0 {
			continue
		}
		p, err := parseMetricLine(line)
		if err != nil {
			f.report(err)
			continue
		}
		if len(p.Values) > 0 && (f.rank0 == nil || f.rank0()) {
			f.sink.Add(p.Step, p.Epoch, p.Values)
		}
	}
}

func (f *metricsFile) report(err error) {
	f.bad++
	switch {
	case f.bad <= metricsBadEvents:
		f.rep.Event(jobs.EventError, fmt.Sprintf("EDL_METRICS_FILE line %d skipped: %v", f.line, err),
			map[string]any{"line": f.line, "error": err.Error()})
	case f.bad == metricsBadEvents+1:
		f.rep.Event(jobs.EventError, "EDL_METRICS_FILE: more bad lines, no longer reported", map[string]any{"line": f.line})
	}
}
