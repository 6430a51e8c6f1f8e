package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimSweepFile(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runSim(context.Background(), []string{"--sweep-file", "../../examples/sweep.json", "--json"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want elastic, static and the comparison:\n%s", len(lines), out.String())
	}
	var modes []string
	for _, l := range lines {
		var r struct {
			Mode  string   `json:"mode"`
			Wall  *float64 `json:"wall_s"`
			Ratio *float64 `json:"wall_ratio"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if (r.Wall == nil || *r.Wall <= 0) && (r.Ratio == nil || *r.Ratio <= 0) {
			t.Errorf("%q: no wall_s nor wall_ratio", l)
		}
		modes = append(modes, r.Mode)
	}
	if strings.Join(modes, ",") != "elastic,static,elastic/static" {
		t.Errorf("modes %v", modes)
	}

	out.Reset()
	if err := runSim(context.Background(), []string{"--sweep-file", "../../examples/sweep.json", "--gpus", "8"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "elastic/static: wall ") || !strings.Contains(out.String(), "same best trial") {
		t.Errorf("table:\n%s", out.String())
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"name": "x", "num_trialz": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"missing file":   {"--sweep-file", "nope.json"},
		"unknown field":  {"--sweep-file", bad},
		"invalid spec":   {"--sweep-file", "../../examples/sweep.json", "--step-s", "-1"},
		"bad log":        {"--sweep-file", "../../examples/sweep.json", "--metric-log", bad},
		"negative noise": {"--sweep-file", "../../examples/sweep.json", "--curve-noise", "-1"},
		"NaN step":       {"--sweep-file", "../../examples/sweep.json", "--step-s", "NaN"},
	} {
		if err := runSim(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if !hasFlag([]string{"--json", "-sweep-file=x.json"}, "sweep-file") || hasFlag([]string{"--sweep"}, "sweep-file") {
		t.Error("hasFlag sweep-file")
	}
}

// A flag of 0 is 0: --overhead 0 (perfect scaling) and zero costs were
// replaced by the defaults (0.1, 2 s, 0.2 s, 0.5 s) and printed the
// default run's figures; --step-s 0 ran at 0.1 s. A bad value is named by
// its flag (the error listed every field and named none).
func TestSimSweepFileZerosAndFlagErrors(t *testing.T) {
	wall := func(args ...string) float64 {
		t.Helper()
		var out, errb bytes.Buffer
		args = append([]string{"--sweep-file", "../../examples/sweep.json", "--json"}, args...)
		if err := runSim(context.Background(), args, &out, &errb); err != nil {
			t.Fatalf("%v: %v: %s", args, err, errb.String())
		}
		var r struct {
			Wall float64 `json:"wall_s"`
		}
		if err := json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &r); err != nil {
			t.Fatal(err)
		}
		return r.Wall
	}
	def := wall()
	for _, args := range [][]string{
		{"--overhead", "0"},
		{"--start-cost-s", "0"},
		{"--start-cost-s", "0", "--resize-cost-s", "0", "--stop-cost-s", "0"},
	} {
		if w := wall(args...); !(w < def) {
			t.Errorf("%v: elastic wall %.2f s, default %.2f s: want less", args, w, def)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--step-s", "0"}, "--step-s 0: must be > 0"},
		{[]string{"--overhead", "-1"}, "--overhead -1: "},
		{[]string{"--start-cost-s", "-2"}, "--start-cost-s -2: "},
		{[]string{"--resize-cost-s", "-1", "--stop-cost-s", "-1"}, "--resize-cost-s -1: "},
		{[]string{"--stop-cost-s", "-0.5"}, "--stop-cost-s -0.5: "},
		{[]string{"--report-every", "0"}, "--report-every 0: must be >= 1"},
		{[]string{"--steps-per-epoch", "-1"}, "--steps-per-epoch -1: "},
		{[]string{"--gpus", "-3"}, "--gpus -3: "},
	} {
		var out, errb bytes.Buffer
		err := runSim(context.Background(), append([]string{"--sweep-file", "../../examples/sweep.json"}, tt.args...), &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error saying %q", tt.args, err, tt.want)
		}
	}
}
