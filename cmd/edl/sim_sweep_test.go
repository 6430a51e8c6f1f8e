package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// edl sim --sweep runs a manifest's workloads at each size and load and
// prints one JSON line per point and a summary per set; --from prints and
// plots them again without running.
func TestSimSweep(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := runMain([]string{"sim", "gen", "--jobs", "30", "--gpus", "8", "--seed", "5", "--out", filepath.Join(dir, "t.csv")}, &out, &errb); code != 0 {
		t.Fatalf("sim gen: exit %d: %s", code, errb.String())
	}
	manifest := filepath.Join(dir, "sweep.csv")
	if err := os.WriteFile(manifest, []byte("vc,trace,gpus,set\na,t.csv,8,tune\nb,t.csv,16,heldout\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	args := []string{"sim", "--sweep", "--manifest", manifest, "--sizes", "1", "--loads", "1,2", "--json"}
	if code := runMain(args, &out, &errb); code != 0 {
		t.Fatalf("sim --sweep: exit %d: %s", code, errb.String())
	}
	points, summaries := 0, map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r struct {
			VC         string  `json:"vc"`
			VsTiresias float64 `json:"vs_tiresias"`
			Summary    string  `json:"summary"`
			Points     int     `json:"points"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		switch {
		case r.Summary != "":
			summaries[r.Summary] = r.Points
		case r.VC != "" && r.VsTiresias > 0:
			points++
		default:
			t.Errorf("line %q", l)
		}
	}
	if points != 4 || summaries["all"] != 4 || summaries["tune"] != 2 || summaries["heldout"] != 2 {
		t.Errorf("%d points, summaries %v:\n%s", points, summaries, out.String())
	}
	saved := filepath.Join(dir, "sweep.json")
	if err := os.WriteFile(saved, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	plot := filepath.Join(dir, "sweep.png")
	if code := runMain([]string{"sim", "--sweep", "--from", saved, "--markdown", "--plot", plot}, &out, &errb); code != 0 {
		t.Fatalf("sim --sweep --from: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "| worst/median | all |") || strings.Count(out.String(), "\n") != 2+4+3 {
		t.Errorf("markdown:\n%s", out.String())
	}
	if st, err := os.Stat(plot); err != nil || st.Size() < 1000 {
		t.Errorf("plot: %v", err)
	}
	out.Reset()
	if code := runMain([]string{"sim", "--sweep", "--from", saved, "--set", "heldout", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("sim --sweep --from --set: exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), `"vc":"b"`); n != 2 || strings.Contains(out.String(), `"vc":"a"`) {
		t.Errorf("--set heldout kept %d of b's points:\n%s", n, out.String())
	}
	for _, bad := range [][]string{
		{"sim", "--sweep", "--manifest", manifest, "--set", "nope"},
		{"sim", "--sweep", "--manifest", manifest, "--sizes", "0"},
		{"sim", "--sweep", "--manifest", manifest, "--parallel", "0"},
	} {
		errb.Reset()
		if code := runMain(bad, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", bad, code, errb.String())
		}
	}
}
