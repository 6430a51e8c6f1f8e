package sweepsim

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs/sweep"
)

// exampleSpec is examples/sweep.json: 16 trials of the built-in MLP, 4 at
// once, workers 1..4, ASHA rungs at 20, 80 and 320 steps.
func exampleSpec(t *testing.T) sweep.Spec {
	t.Helper()
	s, err := sweep.ReadSpecFile(filepath.Join("..", "..", "examples", "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestElasticBeatsStaticOnTheExampleSweep(t *testing.T) {
	c, err := Compare(Config{Spec: exampleSpec(t), Curves: NewSeeded(1)})
	if err != nil {
		t.Fatal(err)
	}
	e, s := c.Elastic, c.Static
	t.Logf("elastic %+v", e)
	t.Logf("static  %+v", s)
	t.Logf("wall ratio %.3f, slot-s ratio %.3f, same best %v", c.WallRatio, c.SlotUsedRatio, c.SameBest)
	if !(c.WallRatio < 0.9) {
		t.Errorf("elastic wall %.1f s, static %.1f s: want elastic below 0.9x", e.WallS, s.WallS)
	}
	if !c.SameBest || e.BestIndex < 0 {
		t.Errorf("best trial: elastic %d, static %d; want the same", e.BestIndex, s.BestIndex)
	}
	if s.MaxTrialWorkers != 1 || s.Grown != 0 || e.MaxTrialWorkers < 2 || e.Grown == 0 {
		t.Errorf("static max %d grown %d, elastic max %d grown %d: want static at 1, elastic grown", s.MaxTrialWorkers, s.Grown, e.MaxTrialWorkers, e.Grown)
	}
	if !(e.SlotIdle < s.SlotIdle) {
		t.Errorf("idle slot-s: elastic %.1f, static %.1f; want elastic lower", e.SlotIdle, s.SlotIdle)
	}
	if e.Cut+e.Completed != 16 || s.Cut+s.Completed != 16 {
		t.Errorf("cut+completed: elastic %d+%d, static %d+%d; want 16 each", e.Cut, e.Completed, s.Cut, s.Completed)
	}
	again, _ := Run(Config{Spec: exampleSpec(t), Curves: NewSeeded(1)}, "elastic")
	if again.WallS != e.WallS || again.BestIndex != e.BestIndex || again.SlotUsed != e.SlotUsed {
		t.Errorf("a second run differs: %+v vs %+v", again, e)
	}
}

// TestRecordedLogPicksItsBestTrial: with a recorded log in which trial 2
// is best throughout, both modes find it.
func TestRecordedLogPicksItsBestTrial(t *testing.T) {
	spec := exampleSpec(t)
	spec.NumTrials, spec.MaxConcurrent = 4, 2
	spec.Scheduler = sweep.Scheduler{Kind: "asha", Grace: 10, Max: 40, ReductionFactor: 2}
	var log strings.Builder
	for trial, base := range []float64{1.0, 0.9, 0.3, 0.8} {
		for step := 0; step <= 40; step += 5 {
			b, _ := json.Marshal(map[string]any{"trial": trial, "step": step, "value": base + 1/float64(step+1)})
			log.Write(append(b, '\n'))
		}
	}
	rec, err := ReadRecorded(strings.NewReader(log.String()))
	if err != nil {
		t.Fatal(err)
	}
	if v, want := rec.Value(2, 12), 0.3+1/float64(11); math.Abs(v-want) > 1e-12 {
		t.Fatalf("trial 2 after step 12: %v, want step 10's value", v)
	}
	c, err := Compare(Config{Spec: spec, Curves: rec})
	if err != nil {
		t.Fatal(err)
	}
	if c.Elastic.BestIndex != 2 || c.Static.BestIndex != 2 || c.Elastic.OracleBest != 2 {
		t.Fatalf("best: elastic %d static %d oracle %d, want 2", c.Elastic.BestIndex, c.Static.BestIndex, c.Elastic.OracleBest)
	}
	spec.NumTrials = 5
	if _, err := Run(Config{Spec: spec, Curves: rec}, "elastic"); err == nil || !strings.Contains(err.Error(), "no points of trial 4") {
		t.Fatalf("a log without trial 4: %v", err)
	}
}

func TestReadRecordedErrors(t *testing.T) {
	cases := map[string]string{
		"":                              "no points",
		"{\"trial\": 0, \"step\": 1}\n": "line 1: want a finite \"value\"",
		"{\"step\": 1, \"value\": 2}\n": "line 1: want a \"trial\"",
		"x\n":                           "line 1",
		"{\"trial\": 0, \"step\": -1, \"value\": 1}": "want a \"step\" >= 0",
	}
	for in, want := range cases {
		if _, err := ReadRecorded(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", in, err, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	spec := exampleSpec(t)
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Spec: spec, Curves: NewSeeded(1), StepS: -1}, "step_s"},
		{Config{Spec: spec}, "no curves"},
		{Config{Spec: spec, Curves: NewSeeded(1), ReportEvery: -2}, "report_every"},
		{Config{Spec: sweep.Spec{}, Curves: NewSeeded(1)}, "sweep: "},
	}
	for _, c := range cases {
		if _, err := Run(c.cfg, "elastic"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.cfg.StepS, err, c.want)
		}
	}
	if _, err := Run(Config{Spec: spec, Curves: NewSeeded(1)}, "fixed"); err == nil || !strings.Contains(err.Error(), "want elastic or static") {
		t.Errorf("mode fixed: %v", err)
	}
}

// TestEpochRungs: a scheduler in epochs judges the points by the epochs
// done (steps_per_epoch); the sweep still ends with a best trial.
func TestEpochRungs(t *testing.T) {
	spec := exampleSpec(t)
	spec.Scheduler = sweep.Scheduler{Kind: "asha", Grace: 1, Max: 8, ReductionFactor: 2, Unit: sweep.UnitEpochs}
	r, err := Run(Config{Spec: spec, Curves: NewSeeded(3), StepsPerEpoch: 40, ReportEvery: 40}, "elastic")
	if err != nil {
		t.Fatal(err)
	}
	if r.BestIndex < 0 || r.Cut == 0 || r.Completed == 0 {
		t.Fatalf("%+v: want a best trial, cuts and completions", r)
	}
	// The completed trials ran 8 epochs of 40 steps: at least 320 steps at
	// 4x speed at most.
	if min := 320 * 0.1 / 4; r.WallS < min {
		t.Fatalf("wall %.1f s, below the %.1f s the last rung needs", r.WallS, min)
	}
}

// On one slot no trial can grow: the grows the controller pinned were
// counted as done (grown 3, max_trial_workers 1).
func TestGrownCountsOnlyGrowsTheClusterMade(t *testing.T) {
	for _, gpus := range []int{1, 3} {
		e, err := Run(Config{Spec: exampleSpec(t), Curves: NewSeeded(1), GPUs: gpus}, "elastic")
		if err != nil {
			t.Fatal(err)
		}
		if e.MaxTrialWorkers == 1 && e.Grown != 0 || e.MaxTrialWorkers > 1 && e.Grown == 0 {
			t.Errorf("%d slots: grown %d, largest trial %d workers", gpus, e.Grown, e.MaxTrialWorkers)
		}
	}
}
