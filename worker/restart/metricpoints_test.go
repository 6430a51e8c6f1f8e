package restart

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/edl-nomad/edl/worker/core"
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
		{`{"step": 1}`, true, 1, 0}, // progress only (docs/exec.md)
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

// Python's json.dumps writes NaN, Infinity and -Infinity bare (a diverged
// loss): they are read as those values; other junk is still refused, with
// a message that says what a number may be.
func TestParseMetricLineNonFinite(t *testing.T) {
	py := func(v float64) string { return fmt.Sprintf("%v", v) }
	cases := []struct {
		line string
		want map[string]string // metric -> value (fmt %v) when ok
		err  string            // else a part of the error
	}{
		{`{"step": 7, "loss": NaN}`, map[string]string{"loss": "NaN"}, ""},
		{`{"step": 7, "loss": Infinity, "val_loss": -Infinity, "acc": 0.5}`, map[string]string{"loss": "+Inf", "val_loss": "-Inf", "acc": "0.5"}, ""},
		{`{"step":7,"epoch":1,"loss":NaN}`, map[string]string{"loss": "NaN"}, ""},
		{`{"name": "NaN Infinity", "step": 7, "loss": NaN}`, nil, `"name" must be a number`},                        // a string stays a string
		{`{"step": 7, "note\"NaN": 1, "loss": -Infinity}`, map[string]string{"note\"NaN": "1", "loss": "-Inf"}, ""}, // an escaped quote
		{`{"step": 7, "loss": "NaN"}`, nil, `"loss" must be a number`},
		{`{"step": 7, "loss": null}`, nil, `"loss" must be a number`},
		{`{"step": 7, "loss": nan}`, nil, "not a JSON object"},
		{`{"step": 7, "loss": inf}`, nil, "not a JSON object"},
		{`{"step": 7, "loss": NaNa}`, nil, "not a JSON object"},
		{`{"step": 7, "loss": +Infinity}`, nil, "not a JSON object"},
		{`{"step": 7, "loss": 1NaN}`, nil, "not a JSON object"},
		{`{"step": NaN, "loss": 1}`, nil, `"step" must be a non-negative integer`},
		{`{"step": 1, "epoch": Infinity, "loss": 1}`, nil, `"epoch" must be a non-negative integer`},
		{`{"step": 7, "loss": [NaN]}`, nil, `"loss" must be a number`},
		{`NaN`, nil, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			p, err := parseMetricLine([]byte(c.line))
			if c.want == nil {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("want an error with %q, got %v (%+v)", c.err, err, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Step != 7 || len(p.Values) != len(c.want) {
				t.Fatalf("point: %+v", p)
			}
			for k, v := range c.want {
				if got, ok := p.Values[k]; !ok || py(got) != v {
					t.Fatalf("%s: want %s, got %v", k, v, got)
				}
			}
		})
	}
	// What Python's json.dumps writes, byte for byte.
	line := `{"step": 3, "epoch": 0, "loss": NaN, "val_loss": Infinity, "x": -Infinity}`
	if p, err := parseMetricLine([]byte(line)); err != nil || !math.IsNaN(p.Values["loss"]) || !math.IsInf(p.Values["val_loss"], 1) || !math.IsInf(p.Values["x"], -1) {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestMetricsFileFollowsAppendsAndSkipsBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), MetricsFileName)
	sink := &points{}
	f := &metricsFile{path: path, sink: sink, rep: core.NewReporter(nil, "j", 0, nil)}
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
	if len(sink.got) != 1 || f.bad != 1 {
		t.Fatalf("after the first write: %d points, %d bad", len(sink.got), f.bad)
	}
	write("ss\": 1.5}\n\n")
	f.read()
	if len(sink.got) != 2 || sink.got[1].Values["loss"] != 1.5 || f.bad != 1 {
		t.Fatalf("a line split across writes: %+v, %d bad", sink.got, f.bad)
	}
	if err := os.WriteFile(path, []byte("{\"step\": 9, \"loss\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.read() // truncated and rewritten: read from the start
	if len(sink.got) != 3 || sink.got[2].Step != 9 {
		t.Fatalf("after a truncation: %+v", sink.got)
	}
}

type points struct{ got []jobmetrics.Point }

func (p *points) Add(step int64, epoch int, values map[string]float64) {
	p.got = append(p.got, jobmetrics.Point{Step: step, Epoch: epoch, Values: values})
}
