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
