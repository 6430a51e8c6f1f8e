package restart

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestMetricsTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), MetricsFileName)
	appendTo := func(s string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	m := &metricsTail{path: path}
	if _, ok, err := m.poll(now); ok || err != nil {
		t.Fatalf("no file yet: ok %v err %v", ok, err)
	}
	appendTo(`{"step": 10}` + "\n" + `not json` + "\n" + `{"loss": 1}` + "\n" + `{"step": 1`)
	p, ok, err := m.poll(now)
	if !ok || err != nil || p.Step != 10 || p.SamplesPerS != 0 {
		t.Fatalf("first poll: %+v ok %v err %v; want step 10, no speed yet", p, ok, err)
	}
	if _, ok, _ := m.poll(now.Add(time.Second)); ok {
		t.Fatal("nothing new, yet a report")
	}
	appendTo(`2, "loss": 0.5, "epoch": 1}` + "\n") // the cut line completed
	p, ok, _ = m.poll(now.Add(2 * time.Second))
	if !ok || p.Step != 12 || p.Loss != 0.5 || p.Epoch != 1 || p.SamplesPerS != 1 {
		t.Fatalf("second poll: %+v, want step 12 loss 0.5 epoch 1 at 1 step/s", p)
	}
	appendTo(`{"step": 13, "loss": NaN}` + "\n") // Python's json.dumps of a diverged loss
	if p, ok, _ = m.poll(now.Add(3 * time.Second)); !ok || p.Step != 13 || !math.IsNaN(p.Loss) {
		t.Fatalf("a NaN loss: %+v ok %v, want step 13 with loss NaN", p, ok)
	}
	appendTo(`{"step": 20, "samples": 640}` + "\n")
	if p, _, _ = m.poll(now.Add(4 * time.Second)); p.Samples != 640 || p.SamplesPerS != 160 {
		t.Fatalf("with samples: %+v, want 640 samples at 160/s", p)
	}
	// A new generation starts at the end: the last line, and speeds from
	// what comes next.
	n := &metricsTail{path: path}
	if p, ok := n.skipExisting(); !ok || p.Step != 20 || p.SamplesPerS != 0 {
		t.Fatalf("skipExisting: %+v ok %v, want step 20 without a speed", p, ok)
	}
	appendTo(`{"step": 21}` + "\n")
	if p, ok, _ := n.poll(now); !ok || p.Step != 21 || p.SamplesPerS != 0 {
		t.Fatalf("after the restart: %+v ok %v", p, ok)
	}
	appendTo(`{"step": 31}` + "\n")
	if p, _, _ := n.poll(now.Add(5 * time.Second)); p.SamplesPerS != 2 {
		t.Fatalf("speed after the restart %v, want 2 steps/s (from its own first line)", p.SamplesPerS)
	}
}

// TestExecProgramReportsSteps: a restart-mode program that appends to
// $EDL_METRICS_FILE has its step and speed on the job's progress.
func TestExecProgramReportsSteps(t *testing.T) {
	// Lines 0.7 s apart, the worker polls every 0.5 s: at least two polls
	// see new lines (one that reads all at once has no speed to tell).
	r := startExec(t, 1, `echo '{"step": 1}' >> "$EDL_METRICS_FILE"; sleep 0.7; echo '{"step": 3}' >> "$EDL_METRICS_FILE"; sleep 0.7; echo '{"step": 6, "loss": 0.25}' >> "$EDL_METRICS_FILE"
while [ ! -e "$OUT/go" ]; do sleep 0.05; done`, 0)
	var p jobs.Progress
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		j, _ := r.jobs.Get(t.Context(), "j1")
		if p = j.Progress; p.Step == 6 {
			break
		}
	}
	if p.Step != 6 || p.Loss != 0.25 || p.SamplesPerS <= 0 || p.SamplesPerS > 20 || p.WorldSize != 1 || p.Generation != 1 {
		t.Errorf("progress %+v, want step 6, loss 0.25, about 3.5 steps/s, world 1, generation 1", p)
	}
	if err := os.WriteFile(filepath.Join(r.out, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, reason := r.wait(30 * time.Second); st != jobs.Succeeded {
		t.Fatalf("job %s (%s), want succeeded", st, reason)
	}
}
