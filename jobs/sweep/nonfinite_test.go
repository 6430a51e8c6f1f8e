package sweep

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

var (
	nan    = math.NaN()
	posInf = math.Inf(1)
	negInf = math.Inf(-1)
)

// A non-finite result is the worst there is, whatever the mode: cut at
// every rung, the first at a rung and the last rung included; recorded
// before, it counts as the worst value in the quantile.
func TestJudgeNonFinite(t *testing.T) {
	sc := Scheduler{Kind: "asha", Grace: 10, Max: 160, ReductionFactor: 4} // rungs 10, 40, 160
	minM, maxM := Metric{Name: "loss", Mode: Min}, Metric{Name: "acc", Mode: Max}
	cases := []struct {
		name     string
		m        Metric
		rung     int
		recorded []float64
		value    float64
		want     Verdict
	}{
		{"min: NaN first at a rung is cut", minM, 0, nil, nan, Cut},
		{"max: NaN first at a rung is cut", maxM, 0, nil, nan, Cut},
		{"min: +Inf is cut", minM, 0, []float64{1, 2}, posInf, Cut},
		{"min: -Inf is cut, not the best", minM, 0, []float64{1, 2}, negInf, Cut},
		{"max: +Inf is cut, not the best", maxM, 0, []float64{1, 2}, posInf, Cut},
		{"max: -Inf is cut", maxM, 0, []float64{1, 2}, negInf, Cut},
		{"NaN at the last rung is cut, not completed", minM, 2, nil, nan, Cut},
		{"max: NaN at the last rung is cut", maxM, 2, []float64{0.9}, nan, Cut},
		{"all recorded NaN, a NaN again: cut", minM, 1, []float64{nan, nan, nan}, nan, Cut},
		{"all recorded NaN: a finite one goes on", minM, 1, []float64{nan, nan, nan}, 100, Promote},
		{"max: all recorded NaN: a finite one goes on", maxM, 1, []float64{nan, nan}, -100, Promote},
		// min, rf 4: the 1/4 quantile of {1, 2, 3, worst, worst} is 2.
		{"min: a NaN among finite ones counts as the worst", minM, 1, []float64{1, nan, 2, 3, nan}, 1.9, Promote},
		{"min: a NaN among finite ones, worse than the cutoff", minM, 1, []float64{1, nan, 2, 3, nan}, 2.1, Cut},
		// max, rf 4: the 3/4 quantile of {worst, 1, 2, 3, 4} is 3.
		{"max: a NaN among finite ones counts as the worst", maxM, 0, []float64{nan, 1, 2, 3, 4}, 3.1, Promote},
		{"max: a -Inf among finite ones, worse than the cutoff", maxM, 0, []float64{negInf, 1, 2, 3, 4}, 2.9, Cut},
		// min with more NaN than finite: the cutoff interpolates towards +Inf.
		{"min: mostly NaN recorded: the cutoff is +Inf", minM, 0, []float64{1, nan}, 50, Promote},
		{"max: mostly NaN recorded: the cutoff is -Inf", maxM, 0, []float64{nan, nan, nan, nan, 1}, -50, Promote},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Judge(sc, c.m, c.rung, c.recorded, c.value); got != c.want {
				t.Fatalf("want %s, got %s", c.want, got)
			}
		})
	}
}

func TestRungValueNonFinite(t *testing.T) {
	pts := []Point{{Step: 1, Value: 5}, {Step: 2, Value: nan}, {Step: 3, Value: 3}, {Step: 4, Value: posInf}, {Step: 6, Value: 1}}
	if v, ok := RungValue(pts, 2, 2); !ok || !math.IsNaN(v) {
		t.Fatalf("a NaN in the window: want NaN, got %v %v", v, ok)
	}
	if v, ok := RungValue(pts, 4, 1); !ok || !math.IsInf(v, 1) {
		t.Fatalf("+Inf in the window: want +Inf, got %v %v", v, ok)
	}
	if v, ok := RungValue(pts, 6, 1); !ok || v != 1 {
		t.Fatalf("finite window: want 1, got %v %v", v, ok)
	}
}

// smallSweep's rungs are at steps 2, 4, 8 (grace 2, rf 2), 2 trials at
// once of 2..8 workers, a budget of 4.

// A trial whose loss turns NaN is cut at once (before its next rung), its
// job cancelled, and once its workers are gone the survivor grows into
// them; the diverged trial is never the best.
func TestDecideCutsADivergedTrialAtOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := smallSweep()
	sw.Spec.NumTrials = 2
	sw.Trials = sw.Trials[:2]
	sw = Decide(sw, nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"

	// Both pass rung 0; trial 1 first and best (lower loss).
	obs := map[int]Observation{0: run(2, 3, 3), 1: run(2, 1, 1)}
	p := Decide(sw, obs, now)
	if p.Sweep.Trials[0].State != TrialRunning || p.Sweep.Trials[1].State != TrialRunning || p.Sweep.Best == nil || p.Sweep.Best.Trial != 1 {
		t.Fatalf("rung 0: %s %s best %+v", p.Sweep.Trials[0].State, p.Sweep.Trials[1].State, p.Sweep.Best)
	}
	sw = p.Sweep

	// Trial 1 diverges at step 3, before rung 1 (step 4).
	obs[1] = run(2, 1, 1, nan)
	p = Decide(sw, obs, now)
	tr := p.Sweep.Trials[1]
	if tr.State != TrialCut || tr.Rung != 1 || len(tr.Results) != 2 || tr.Results[1].Step != 3 || !math.IsNaN(tr.Results[1].Value) {
		t.Fatalf("trial 1: want cut at rung 1, step 3, NaN; got %s rung %d results %+v", tr.State, tr.Rung, tr.Results)
	}
	if p.Cancel["j-1"] == "" {
		t.Fatalf("its job is not cancelled: %v", p.Cancel)
	}
	if tr.LastMetric == nil || !math.IsNaN(tr.LastMetric.Value) {
		t.Fatalf("last metric: %+v", tr.LastMetric)
	}
	if b := p.Sweep.Best; b == nil || b.Trial != 0 {
		t.Fatalf("best: want trial 0, the one that did not diverge, got %+v", b)
	}
	var cut *Event
	for i, e := range p.Events {
		if e.Type == EventCut {
			cut = &p.Events[i]
		}
	}
	if cut == nil || !strings.Contains(cut.Message, "loss NaN") || !strings.Contains(cut.Message, "diverged") ||
		cut.Data["non_finite"] != "NaN" || cut.Data["value"] != nil || cut.Data["diverged"] != true {
		t.Fatalf("cut event: %+v", cut)
	}
	// Every event and the sweep can be written as JSON (the store does).
	mustJSON(t, p.Events)
	mustJSON(t, p.Sweep)
	sw = p.Sweep

	// Its job still holds 2 workers: nothing grows yet. Once they are
	// gone, trial 0 grows into them (budget 2 x 2).
	obs[1] = Observation{JobState: jobs.Cancelling, Current: 2, Min: 2, Max: 8, Points: obs[1].Points}
	p = Decide(sw, obs, now)
	if len(p.Pin) != 0 {
		t.Fatalf("grew while the cut trial's job held its workers: %v", p.Pin)
	}
	sw = p.Sweep
	obs[1] = Observation{JobState: jobs.Cancelled, Min: 2, Max: 8, Points: obs[1].Points}
	p = Decide(sw, obs, now)
	if p.Pin[0] != 4 || !hasEvent(p, EventGrown) {
		t.Fatalf("want trial 0 grown to 4, got pin %v events %+v", p.Pin, p.Events)
	}
	if again := Decide(p.Sweep, obs, now); again.Changed(p.Sweep) {
		t.Fatalf("deciding twice changed: %+v", again.Events)
	}
}

// Under "max" an infinite accuracy is no better: cut, never the best.
func TestDecideMaxInfIsCut(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := smallSweep()
	sw.Spec.Metric = Metric{Name: "acc", Mode: Max}
	sw = Decide(sw, nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	p := Decide(sw, map[int]Observation{0: run(2, 0.5, 0.5), 1: run(2, 0.5, posInf)}, now)
	if p.Sweep.Trials[1].State != TrialCut || p.Sweep.Trials[0].State != TrialRunning {
		t.Fatalf("trials: %s %s", p.Sweep.Trials[0].State, p.Sweep.Trials[1].State)
	}
	if b := p.Sweep.Best; b == nil || b.Trial != 0 {
		t.Fatalf("best: %+v", b)
	}
}

// Every trial diverges: every one is cut, the sweep ends with no best.
func TestDecideAllTrialsDiverge(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep // trials 0 and 1 start
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	obs := map[int]Observation{0: run(2, nan), 1: run(2, 1, negInf)}
	p := Decide(sw, obs, now)
	if p.Sweep.Trials[0].State != TrialCut || p.Sweep.Trials[1].State != TrialCut || len(p.Start) != 1 || p.Start[0] != 2 {
		t.Fatalf("trials %s %s, start %v", p.Sweep.Trials[0].State, p.Sweep.Trials[1].State, p.Start)
	}
	sw = p.Sweep
	sw.Trials[2].JobID = "j-2"
	obs[0] = Observation{JobState: jobs.Cancelled, Points: obs[0].Points}
	obs[1] = Observation{JobState: jobs.Cancelled, Points: obs[1].Points}
	obs[2] = run(2, 1, 1, 1, nan)
	p = Decide(sw, obs, now)
	if p.Sweep.Trials[2].State != TrialCut || p.Sweep.Trials[2].Rung != 1 {
		t.Fatalf("trial 2: %s at rung %d", p.Sweep.Trials[2].State, p.Sweep.Trials[2].Rung)
	}
	sw = p.Sweep
	obs[2] = Observation{JobState: jobs.Cancelled, Points: obs[2].Points}
	p = Decide(sw, obs, now)
	if p.Sweep.State != Succeeded || p.Sweep.Best != nil {
		t.Fatalf("sweep %s, best %+v", p.Sweep.State, p.Sweep.Best)
	}
}

// The best trial that diverges later is not the best any more.
func TestDecideBestTrialDivergesLater(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := smallSweep()
	sw.Spec.NumTrials, sw.Spec.MaxConcurrent = 1, 1
	sw.Trials = sw.Trials[:1]
	sw = Decide(sw, nil, now).Sweep
	sw.Trials[0].JobID = "j-0"
	p := Decide(sw, map[int]Observation{0: run(2, 1, 1, 1)}, now)
	if p.Sweep.Best == nil || p.Sweep.Best.Trial != 0 {
		t.Fatalf("best: %+v", p.Sweep.Best)
	}
	p = Decide(p.Sweep, map[int]Observation{0: run(2, 1, 1, 1, 1, nan)}, now)
	if p.Sweep.Trials[0].State != TrialCut || p.Sweep.Best != nil || !hasEvent(p, EventBestChanged) {
		t.Fatalf("trial 0 %s, best %+v, events %+v", p.Sweep.Trials[0].State, p.Sweep.Best, p.Events)
	}
}

// A job that succeeds with a NaN last value (its final loss diverged) is
// cut at the last rung with that value: not completed with its last
// finite one, and not the best.
func TestDecideSucceededJobWithANaNFinalValue(t *testing.T) {
	now := time.Unix(1000, 0)
	sw := Decide(smallSweep(), nil, now).Sweep
	sw.Trials[0].JobID, sw.Trials[1].JobID = "j-0", "j-1"
	sw.Trials[0].Rung = 1
	sw.Trials[0].Results = []RungResult{{Rung: 0, Step: 2, Value: 0.1}, {Rung: 1, Step: 4, Value: 0.1}}
	done := Observation{JobState: jobs.Succeeded, Min: 2, Max: 8, EndedAt: now.Add(-MetricsGrace)}
	done.Points = run(2, 0.1, 0.1, 0.1, 0.1, 0.1, nan).Points // ends at step 6 of 8
	p := Decide(sw, map[int]Observation{0: done, 1: run(2, 5, 5)}, now)
	tr := p.Sweep.Trials[0]
	if tr.State != TrialCut || tr.Rung != 2 || !math.IsNaN(tr.Results[2].Value) || tr.Results[2].Step != 6 {
		t.Fatalf("trial 0: %s rung %d results %+v", tr.State, tr.Rung, tr.Results)
	}
	if b := p.Sweep.Best; b == nil || b.Trial != 1 {
		t.Fatalf("best: want trial 1, got %+v", b)
	}
}

// JSON: a non-finite value is null with its name in "non_finite"; it
// reads back as the same value; a finite one is written as before.
func TestNonFiniteJSONRoundTrip(t *testing.T) {
	for _, v := range []float64{nan, posInf, negInf} {
		tr := Trial{Index: 1, State: TrialCut, Rung: 0, Results: []RungResult{{Rung: 0, Step: 3, Value: v}},
			LastMetric: &Point{Step: 3, Value: v, Epoch: 1}}
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		name := jobs.NonFiniteName(v)
		want := `"results":[{"rung":0,"step":3,"value":null,"non_finite":"` + name + `"}],"last_metric":{"step":3,"value":null,"non_finite":"` + name + `","epoch":1}`
		if !strings.Contains(string(b), want) {
			t.Fatalf("%v: %s\nwant in it %s", v, b, want)
		}
		var back Trial
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got := back.Results[0].Value
		if jobs.NonFiniteName(got) != name || jobs.NonFiniteName(back.LastMetric.Value) != name || back.LastMetric.Epoch != 1 {
			t.Fatalf("%v read back as %v, %+v", v, got, back.LastMetric)
		}
	}
	b := mustJSON(t, RungResult{Rung: 1, Step: 4, Value: 0.5})
	if b != `{"rung":1,"step":4,"value":0.5}` {
		t.Fatalf("finite: %s", b)
	}
	var r RungResult
	if err := json.Unmarshal([]byte(`{"rung":1,"step":4,"value":0.5}`), &r); err != nil || r.Value != 0.5 {
		t.Fatalf("finite read: %+v %v", r, err)
	}
	if err := json.Unmarshal([]byte(`{"rung":1,"step":4,"value":null,"non_finite":"nan?"}`), &r); err == nil {
		t.Fatal("a bad non_finite name was read")
	}
	if jobs.FormatValue(nan) != "NaN" || jobs.FormatValue(negInf) != "-Infinity" || jobs.FormatValue(0.12345) != "0.1235" {
		t.Fatal(jobs.FormatValue(nan), jobs.FormatValue(negInf), jobs.FormatValue(0.12345))
	}
}
