package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLoads(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    []float64
	}{
		{in: "0.5,1,2,4", want: []float64{0.5, 1, 2, 4}},
		{in: " 3 ", want: []float64{3}},
		{in: "1,0", err: `"0": not a positive number`},
		{in: "1,x", err: `"x"`},
		{in: "2,2", err: "given twice"},
		{in: "1,,2", err: `"": not a positive number`},
	} {
		got, err := parseLoads(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

// edl sim gen writes a trace edl sim reads; --compare --loads prints one
// table row and one JSON line per policy and load, and a load plot.
func TestSimGenAndCompareLoads(t *testing.T) {
	dir := t.TempDir()
	trace, plot := filepath.Join(dir, "t.csv"), filepath.Join(dir, "load.png")
	var out, errb bytes.Buffer
	if code := runMain([]string{"sim", "gen", "--jobs", "60", "--gpus", "16", "--seed", "3", "--out", trace}, &out, &errb); code != 0 {
		t.Fatalf("sim gen: exit %d: %s", code, errb.String())
	}
	out.Reset()
	args := []string{"sim", "--trace", trace, "--gpus", "16", "--compare", "--loads", "1,2", "--plot", plot}
	if code := runMain(args, &out, &errb); code != 0 {
		t.Fatalf("sim: exit %d: %s", code, errb.String())
	}
	var rows, lines int
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "{") {
			var r struct {
				Policy string  `json:"policy"`
				Load   float64 `json:"load"`
				Jobs   int     `json:"jobs"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil || r.Jobs != 60 || (r.Load != 1 && r.Load != 2) {
				t.Errorf("JSON line %q: %+v, %v", l, r, err)
			}
			lines++
		} else if strings.HasPrefix(strings.TrimSpace(l), "load") {
			continue
		} else if strings.Contains(l, "elastic") || strings.Contains(l, "fifo") || strings.Contains(l, "tiresias") {
			rows++
		}
	}
	if rows != 8 || lines != 8 {
		t.Errorf("%d table rows and %d JSON lines, want 8 each:\n%s", rows, lines, out.String())
	}
	if st, err := os.Stat(plot); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
	for _, bad := range [][]string{
		{"sim", "--trace", trace, "--loads", "1,-2"},
		{"sim", "--trace", trace, "--load", "0"},
		{"sim", "gen", "--jobs", "0"},
	} {
		errb.Reset()
		if code := runMain(bad, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", bad, code, errb.String())
		}
	}
}

// --plot to a path that cannot be written failed after every run (32 s of a
// 20,000-job trace); it fails before them now, and a good path still gets
// its PNG.
func TestSimPlotPathCheckedFirst(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	for _, bad := range []string{filepath.Join(dir, "missing", "x.png"), dir} {
		err := runSim(context.Background(), []string{"--trace", "no-such-trace.csv", "--plot", bad}, &out, &errb)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--plot") {
			t.Errorf("--plot %s: %v, want a usage error naming --plot before the trace is read", bad, err)
		}
	}
	if err := writableFile(filepath.Join(dir, "ok.png")); err != nil {
		t.Errorf("writable path: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the check left %v behind", left)
	}
}
