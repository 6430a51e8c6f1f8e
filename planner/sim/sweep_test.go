package sim

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"strings"
	"testing"
)

func TestReadSweepManifest(t *testing.T) {
	for _, tc := range []struct {
		name, csv, err string
		want           int
	}{
		{name: "two sets", csv: "vc,trace,gpus,set,window\na,a.csv,8,tune,all\nb,b.csv,16,heldout,\n", want: 2},
		{name: "no window column", csv: "vc,trace,gpus,set\na,a.csv,8,tune\n", want: 1},
		{name: "bad set", csv: "vc,trace,gpus,set\na,a.csv,8,test\n", err: `set "test"`},
		{name: "bad gpus", csv: "vc,trace,gpus,set\na,a.csv,0,tune\n", err: `gpus "0"`},
		{name: "missing column", csv: "vc,trace,set\na,a.csv,tune\n", err: `no column "gpus"`},
		{name: "empty", csv: "vc,trace,gpus,set\n", err: "no workloads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadSweepManifest(strings.NewReader(tc.csv))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != tc.want {
				t.Fatalf("%+v, %v; want %d cases", got, err, tc.want)
			}
		})
	}
}

func TestFitTrace(t *testing.T) {
	tr := []TraceJob{{ID: "a", GPUs: 16, Duration: 100}, {ID: "b", GPUs: 4, Duration: 10}}
	got, cut := FitTrace(tr, 8)
	if cut != 1 || got[0].GPUs != 8 || got[0].Duration != 200 || got[1] != tr[1] {
		t.Errorf("fit: %+v (%d cut), want a at 8 GPUs for 200 s, b unchanged", got, cut)
	}
	if tr[0].GPUs != 16 {
		t.Errorf("FitTrace changed its input: %+v", tr[0])
	}
}

func TestSummarize(t *testing.T) {
	ps := []SweepPoint{
		{VC: "a", Set: "tune", GPUs: 8, Load: 1, VsTiresias: 0.5, VsFIFO: 0.4, P95VsTiresias: 0.9},
		{VC: "a", Set: "tune", GPUs: 8, Load: 2, VsTiresias: 0.9, VsFIFO: 0.2, P95VsTiresias: 1.1},
		{VC: "b", Set: "heldout", GPUs: 16, Load: 1, VsTiresias: 0.7, VsFIFO: 0.3, P95VsTiresias: 0.8},
	}
	all := Summarize(ps, "")
	if all.Points != 3 || all.WorstVsTiresias != 0.9 || all.MedianVsTiresias != 0.7 || all.Worst != "a@8 load 2" ||
		all.WorstVsFIFO != 0.4 || all.MedianP95VsTiresias != 0.9 || all.WorstP95VsTiresias != 1.1 {
		t.Errorf("all: %+v", all)
	}
	if tune := Summarize(ps, "tune"); tune.Points != 2 || math.Abs(tune.MedianVsTiresias-0.7) > 1e-12 {
		t.Errorf("tune: %+v, want 2 points, median 0.7", tune)
	}
	if sets := SweepSets(ps); len(sets) != 3 || sets[2].Set != "heldout" || sets[2].Points != 1 {
		t.Errorf("sets: %+v", sets)
	}
}

// A small sweep: every point has all three policies' figures, baselines
// are reused from an earlier run without being run again, and the table
// and plot are written.
func TestSweepSmall(t *testing.T) {
	tr := readPhilly(t, 30)
	cases := []SweepCase{{VC: "x", Trace: "x.csv", GPUs: 32}, {VC: "y", Trace: "x.csv", GPUs: 8, HeldOut: true}}
	traces := map[string][]TraceJob{"x.csv": tr}
	o := SweepOptions{Base: DefaultOptions(Elastic), Sizes: []float64{0.5, 1}, Loads: []float64{1, 2}, Parallel: 2}
	ps, err := Sweep(context.Background(), cases, traces, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 8 {
		t.Fatalf("%d points, want 8", len(ps))
	}
	for _, p := range ps {
		if p.ElasticAvg <= 0 || p.TiresiasAvg <= 0 || p.FIFOAvg <= 0 || p.VsTiresias != p.ElasticAvg/p.TiresiasAvg {
			t.Errorf("point %+v", p)
		}
	}
	if ps[0].GPUs != 16 || ps[4].GPUs != 4 || ps[4].FittedJobs == 0 {
		t.Errorf("points %+v, %+v: want 16 GPUs, then 4 with the 8-GPU requests cut", ps[0], ps[4])
	}
	// Reused baselines are taken as they are: fake ones show through.
	old := append([]SweepPoint(nil), ps...)
	for i := range old {
		old[i].TiresiasAvg, old[i].FIFOAvg = 1, 2
	}
	o.Reuse = old
	again, err := Sweep(context.Background(), cases, traces, o)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range again {
		if p.TiresiasAvg != 1 || p.FIFOAvg != 2 || p.ElasticAvg != ps[i].ElasticAvg {
			t.Errorf("reused point %+v", p)
		}
	}
	var tab bytes.Buffer
	if err := WriteSweepTable(&tab, ps, true); err != nil || !strings.Contains(tab.String(), "| worst/median | heldout |") {
		t.Errorf("table: %v\n%s", err, tab.String())
	}
	var img bytes.Buffer
	if err := WriteSweepPlot(&img, "test", ps); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&img); err != nil {
		t.Errorf("plot: %v", err)
	}
}
