package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// edl sim --with-sweeps: sweeps beside a small trace, elastic trials
// against static ones, one JSON line each and the comparison.
func TestSimWithSweeps(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.csv")
	var b strings.Builder
	b.WriteString("job_id,submit_s,num_gpus,duration_s\n")
	for k := range 12 {
		fmt.Fprintf(&b, "j%d,%d,%d,%d\n", k, k*900, 1+k%4, 3600*(1+k%3))
	}
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	args := []string{"--with-sweeps", "../../examples/sweep.json", "--trace", trace, "--gpus", "16", "--gpus-per-node", "8", "--sweeps", "3", "--json"}
	if err := runSim(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want elastic, static and the comparison:\n%s", len(lines), out.String())
	}
	var el, st struct {
		Mode     string  `json:"mode"`
		Sweeps   int     `json:"sweeps"`
		Makespan float64 `json:"sweep_makespan_mean_s"`
		MaxW     int     `json:"max_trial_workers"`
	}
	var cmp struct {
		Ratio float64 `json:"sweep_makespan_ratio"`
		Same  int     `json:"same_best_trial"`
	}
	for i, v := range []any{&el, &st, &cmp} {
		if err := json.Unmarshal([]byte(lines[i]), v); err != nil {
			t.Fatalf("%q: %v", lines[i], err)
		}
	}
	if el.Mode != "elastic" || st.Mode != "static" || el.Sweeps != 3 || st.MaxW != 1 || el.MaxW < 2 || !(cmp.Ratio > 0 && cmp.Ratio < 1) {
		t.Errorf("elastic %+v, static %+v, comparison %+v: want 3 sweeps each, static trials at 1 worker, elastic ones grown and sooner", el, st, cmp)
	}
	for _, bad := range [][]string{
		{"--with-sweeps", "", "--trace", trace},
		{"--with-sweeps", "../../examples/sweep.json", "--trace", trace, "--sweeps", "0"},
		{"--with-sweeps", "../../examples/sweep.json", "--trace", trace, "--sweep-step-s", "0"},
		{"--with-sweeps", "../../examples/job.json", "--trace", trace},
	} {
		if err := runSim(context.Background(), bad, &out, &errb); err == nil || !strings.Contains(err.Error(), "sim: ") {
			t.Errorf("%v: want a usage error, got %v", bad, err)
		}
	}
	// Named by the flag: --sweep-step-s was named step_s, and a negative
	// --steps-per-epoch or --curve-noise ran as if valid.
	for _, tt := range []struct{ flag, v string }{{"sweep-step-s", "0"}, {"steps-per-epoch", "-1"}, {"curve-noise", "-1"}} {
		bad := []string{"--with-sweeps", "../../examples/sweep.json", "--trace", trace, "--" + tt.flag, tt.v}
		want := "--" + tt.flag + " " + tt.v + ": "
		if err := runSim(context.Background(), bad, &out, &errb); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want an error saying %q", bad, err, want)
		}
	}
}
