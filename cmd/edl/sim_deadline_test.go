package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestSimElasticFlowJSON(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--format", "elasticflow", "--trace", "../../testdata/elasticflow/100jobs_1500lam.csv",
		"--throughputs", "../../testdata/elasticflow/throughputs_A100", "--gpus", "128", "--gpus-per-node", "8", "--json"}
	if err := runSim(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want one per policy:\n%s", len(lines), out.String())
	}
	seen := map[string]float64{}
	for _, l := range lines {
		var r struct {
			Policy string   `json:"policy"`
			Ratio  *float64 `json:"deadline_met_ratio"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Ratio == nil {
			t.Fatalf("line %q: %v", l, err)
		}
		seen[r.Policy] = *r.Ratio
	}
	for _, p := range []string{"deadline", "edf", "tiresias", "elastic"} {
		if _, ok := seen[p]; !ok {
			t.Errorf("no line for %s: %v", p, seen)
		}
	}
	if seen["deadline"] != 1 {
		t.Errorf("deadline_met_ratio %g on ElasticFlow's generated trace, want 1", seen["deadline"])
	}
}

func TestSimDeadlineFlagErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"format": {"--format", "philly"},
		"policy": {"--format=edl", "--trace", "../../testdata/traces/synthetic_mix_s1.csv", "--policy", "fifo"},
		"ddl":    {"--format=edl", "--trace", "../../testdata/traces/synthetic_mix_s1.csv", "--min-ddl", "2", "--max-ddl", "1"},
		"trace":  {"--format", "elasticflow", "--trace", "nope.csv"},
	} {
		var out, errb bytes.Buffer
		if err := runSim(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if !hasFlag([]string{"--gpus", "4", "-format=edl"}, "format") || hasFlag([]string{"--trace", "x.csv"}, "format") {
		t.Error("hasFlag format")
	}
}

// A --throughputs folder that is missing, or holds no tables, is named in
// the error (it said "open .: no such file or directory").
func TestSimThroughputsErrorNamesTheFolder(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{"/nonexistent-edl-tables", empty} {
		var out, errb bytes.Buffer
		args := []string{"--format", "elasticflow", "--trace", "../../testdata/elasticflow/100jobs_1500lam.csv", "--throughputs", dir}
		err := runSim(context.Background(), args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), " . ") || strings.Contains(err.Error(), "open .") {
			t.Errorf("--throughputs %s: %v, want an error naming the folder", dir, err)
		}
	}
}
