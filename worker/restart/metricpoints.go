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

// nonFiniteTokens are the bare words Python's json.dumps writes for NaN
// and the infinities (allow_nan=True, its default), and their values.
var nonFiniteTokens = []struct {
	word  string
	value float64
}{{"NaN", math.NaN()}, {"-Infinity", math.Inf(-1)}, {"Infinity", math.Inf(1)}}

// pythonJSON makes a line that Python's json.dumps wrote with NaN,
// Infinity or -Infinity in it into JSON: each such bare word (outside
// strings, standing alone) becomes null, and nonFinite maps the offset
// just past that null to its value. A line without them comes back as is.
func pythonJSON(line []byte) (out []byte, nonFinite map[int64]float64) {
	inString, escaped, last := false, false, 0
	for i := 0; i < len(line); i++ {
		c := line[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			continue
		}
		if i > 0 && isWordByte(line[i-1]) {
			continue
		}
		for _, tok := range nonFiniteTokens {
			end := i + len(tok.word)
			if !bytes.HasPrefix(line[i:], []byte(tok.word)) || (end < len(line) && isWordByte(line[end])) {
				continue
			}
			if nonFinite == nil {
				nonFinite = map[int64]float64{}
			}
			out = append(append(out, line[last:i]...), "null"...)
			nonFinite[int64(len(out))] = tok.value
			last, i = end, end-1
			break
		}
	}
	if nonFinite == nil {
		return line, nil
	}
	return append(out, line[last:]...), nonFinite
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c == '+' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// nonFiniteKeys names the top-level keys of the object in line whose
// values are the nulls pythonJSON wrote (at the offsets in at).
func nonFiniteKeys(line []byte, at map[int64]float64) map[string]float64 {
	out := map[string]float64{}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return out
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return out
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		if k, ok := key.(string); ok && string(v) == "null" {
			if x, ok := at[dec.InputOffset()]; ok {
				out[k] = x
			}
		}
	}
	return out
}

// parseMetricLine reads one line of $EDL_METRICS_FILE. A metric may be
// NaN, Infinity or -Infinity, bare as Python's json.dumps writes them (a
// diverged loss is a real observation: a sweep cuts the trial); a string
// such as "NaN" is not a number.
func parseMetricLine(line []byte) (jobmetrics.Point, error) {
	line, at := pythonJSON(line)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil || raw == nil {
		return jobmetrics.Point{}, errors.New("not a JSON object")
	}
	nonFinite := map[string]float64{}
	if at != nil {
		nonFinite = nonFiniteKeys(line, at)
	}
	var p jobmetrics.Point
	s, ok := raw["step"]
	if !ok {
		return p, errors.New(`no "step"`)
	}
	if _, bad := nonFinite["step"]; bad || json.Unmarshal(s, &p.Step) != nil || p.Step < 0 {
		return p, errors.New(`"step" must be a non-negative integer`)
	}
	if e, ok := raw["epoch"]; ok {
		if _, bad := nonFinite["epoch"]; bad || json.Unmarshal(e, &p.Epoch) != nil || p.Epoch < 0 {
			return p, errors.New(`"epoch" must be a non-negative integer`)
		}
	}
	p.Values = map[string]float64{}
	for k, v := range raw {
		if k == "step" || k == "epoch" {
			continue
		}
		if x, ok := nonFinite[k]; ok {
			p.Values[k] = x
			continue
		}
		var x float64
		if string(v) == "null" || json.Unmarshal(v, &x) != nil {
			return p, fmt.Errorf("%q must be a number (NaN, Infinity or -Infinity bare, as Python's json.dumps writes them), not %s", k, truncateRaw(v))
		}
		p.Values[k] = x
	}
	return p, nil
}

func truncateRaw(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
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
