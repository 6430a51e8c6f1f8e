package worker

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseMetricLine(t *testing.T) {
	cases := []struct {
		line    string
		ok      bool
		step    int64
		metrics int
	}{
		{`{"step": 12, "loss": 0.5, "val_loss": 0.7}`, true, 12, 2},
		{`{"step": 3, "epoch": 1, "acc": 1}`, true, 3, 1},
		{`{"loss": 0.5}`, false, 0, 0},
		{`{"step": -1, "loss": 0.5}`, false, 0, 0},
		{`{"step": 1.5, "loss": 0.5}`, false, 0, 0},
		{`{"step": 1}`, false, 0, 0},
		{`{"step": 1, "loss": "low"}`, false, 0, 0},
		{`[1, 2]`, false, 0, 0},
		{`step=1 loss=2`, false, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			p, err := parseMetricLine([]byte(c.line))
			if (err == nil) != c.ok {
				t.Fatalf("ok: want %v, got err %v", c.ok, err)
			}
			if c.ok && (p.Step != c.step || len(p.Values) != c.metrics) {
				t.Fatalf("point: %+v", p)
			}
		})
	}
}

func TestMetricsFileFollowsAppendsAndSkipsBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), metricsFileName)
	f := &metricsFile{path: path, sink: &metricSink{}, rep: newReporter(nil, "j", 0, nil)}
	f.read() // no file yet: nothing, no error
	write := func(s string) {
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteString(s); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	write("{\"step\": 1, \"loss\": 2}\nnot json\n{\"step\": 2, \"lo")
	f.read()
	if len(f.sink.pending) != 1 || f.bad != 1 {
		t.Fatalf("after the first write: %d points, %d bad", len(f.sink.pending), f.bad)
	}
	write("ss\": 1.5}\n\n")
	f.read()
	if len(f.sink.pending) != 2 || f.sink.pending[1].Values["loss"] != 1.5 || f.bad != 1 {
		t.Fatalf("a line split across writes: %+v, %d bad", f.sink.pending, f.bad)
	}
	if err := os.WriteFile(path, []byte("{\"step\": 9, \"loss\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.read() // truncated and rewritten: read from the start
	if len(f.sink.pending) != 3 || f.sink.pending[2].Step != 9 {
		t.Fatalf("after a truncation: %+v", f.sink.pending)
	}
}
