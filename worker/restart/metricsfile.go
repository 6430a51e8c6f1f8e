package restart

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
)

// MetricsFileName is the file in the exec dir that a restart-mode program
// may append its progress to, one JSON object a line:
//
//	{"step": 120}
//	{"step": 130, "samples": 4160, "loss": 0.71, "epoch": 1}
//
// step (steps applied so far, required) and the optional cumulative
// samples, loss and epoch. Rank 0's worker reads it (EDL_METRICS_FILE) and
// reports the newest line as the job's progress, with the speed since the
// generation's first line (samples/s, else steps/s), so a deadline job's
// trainer.exec.total_steps can be planned for. Other lines are ignored.
const MetricsFileName = "metrics.jsonl"

// metricsLine is one line of the metrics file.
type metricsLine struct {
	Step    *int64   `json:"step"`
	Samples *int64   `json:"samples"`
	Loss    *float64 `json:"loss"`
	Epoch   *int     `json:"epoch"`
}

// metricsTail follows a metrics file from its start.
type metricsTail struct {
	path    string
	off     int64
	partial []byte
	// first is the generation's first line and when it was read; speeds
	// are measured from it.
	first   *jobs.Progress
	firstAt time.Time
	last    jobs.Progress
}

// maxMetricsLine bounds one line (a longer one is skipped).
const maxMetricsLine = 64 << 10

// poll reads what was appended since the last poll and returns the newest
// progress (ok false when no new step line came), its speed over the time
// since the first line.
func (m *metricsTail) poll(now time.Time) (jobs.Progress, bool, error) {
	f, err := os.Open(m.path)
	if errors.Is(err, fs.ErrNotExist) {
		return jobs.Progress{}, false, nil
	}
	if err != nil {
		return jobs.Progress{}, false, err
	}
	defer f.Close()
	if _, err := f.Seek(m.off, io.SeekStart); err != nil {
		return jobs.Progress{}, false, err
	}
	buf, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return jobs.Progress{}, false, err
	}
	m.off += int64(len(buf))
	data := append(m.partial, buf...)
	i := bytes.LastIndexByte(data, '\n')
	m.partial = append([]byte(nil), data[i+1:]...)
	if len(m.partial) > maxMetricsLine {
		m.partial = nil
	}
	p, ok := m.parse(data[:i+1], now)
	return p, ok, nil
}

// parse takes complete lines and returns the newest progress among them
// (ok false: no step line), with its speed since the first line the tail
// saw, read at now.
func (m *metricsTail) parse(data []byte, now time.Time) (jobs.Progress, bool) {
	got := false
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		var l metricsLine
		line, at := pythonJSON(line) // NaN, Infinity: null here, their values in at
		if json.Unmarshal(line, &l) != nil || l.Step == nil || *l.Step < 0 {
			continue
		}
		if at != nil {
			if x, ok := nonFiniteKeys(line, at)["loss"]; ok {
				l.Loss = &x // a diverged loss is shown as such, not as none
			}
		}
		p := jobs.Progress{Step: *l.Step}
		if l.Samples != nil && *l.Samples >= 0 {
			p.Samples = *l.Samples
		}
		if l.Loss != nil {
			p.Loss = *l.Loss
		}
		if l.Epoch != nil && *l.Epoch >= 0 {
			p.Epoch = *l.Epoch
		}
		if m.first == nil {
			f := p
			m.first, m.firstAt = &f, now
		}
		m.last, got = p, true
	}
	if !got {
		return jobs.Progress{}, false
	}
	p := m.last
	if dt := now.Sub(m.firstAt).Seconds(); dt > 0 {
		if p.Samples > 0 {
			p.SamplesPerS = float64(p.Samples-m.first.Samples) / dt
		} else {
			p.SamplesPerS = float64(p.Step-m.first.Step) / dt
		}
		p.SamplesPerS = max(p.SamplesPerS, 0)
	}
	return p, true
}

// skipExisting starts the tail at the file's end (a program restarted in
// a new generation appends to the file of the last): the newest line so
// far, if any, is the progress until the program writes again, and speeds
// are measured from what comes after.
func (m *metricsTail) skipExisting() (jobs.Progress, bool) {
	f, err := os.Open(m.path)
	if err != nil {
		return jobs.Progress{}, false
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return jobs.Progress{}, false
	}
	from := max(end-maxMetricsLine, 0)
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return jobs.Progress{}, false
	}
	buf, err := io.ReadAll(io.LimitReader(f, end-from))
	if err != nil {
		return jobs.Progress{}, false
	}
	m.off = from + int64(len(buf))
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		m.partial = append([]byte(nil), buf[i+1:]...)
		buf = buf[:i+1]
	}
	if k := bytes.IndexByte(buf, '\n'); from > 0 && k >= 0 {
		buf = buf[k+1:] // the first line may be cut
	}
	prev := &metricsTail{path: m.path}
	p, ok := prev.parse(buf, time.Time{})
	return p, ok
}

// followMetrics reports rank 0's program's metrics file as the job's
// progress every poll until ctx ends (the program stopped). The file's
// newest line from before this generation is reported at once, so that a
// restart does not show the job back at step 0.
func (w *Worker) followMetrics(ctx context.Context, path string, world int, gen int64) {
	m := &metricsTail{path: path}
	if p, ok := m.skipExisting(); ok {
		p.WorldSize, p.Generation = world, gen
		w.Rep.Progress(p)
	}
	_ = periodic.Every(ctx, w.Ecfg.Poll, func() bool {
		p, ok, err := m.poll(time.Now())
		if err != nil {
			w.Log.Warn("read the program's metrics file", "path", path, "err", err)
		} else if ok {
			p.WorldSize, p.Generation = world, gen
			w.Rep.Progress(p)
		}
		return true
	})
}
