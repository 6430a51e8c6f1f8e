package bench

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSteadyGaps(t *testing.T) {
	st := func(at float64, world int, gen int64) liveBenchStep {
		return liveBenchStep{at: at, world: world, gen: gen}
	}
	tests := []struct {
		name          string
		s             []liveBenchStep
		warmup, n     int
		want          []float64
		wantFewerThan bool
	}{
		{"warm-up lines skipped, then consecutive gaps", []liveBenchStep{st(0, 2, 1), st(1, 2, 1), st(1.5, 2, 1), st(2.25, 2, 1)}, 1, 10, []float64{0.5, 0.75}, false},
		{"at most n", []liveBenchStep{st(0, 2, 1), st(1, 2, 1), st(2, 2, 1), st(3, 2, 1)}, 0, 2, []float64{1, 1}, false},
		{"other worlds and a generation switch are not step times", []liveBenchStep{st(0, 1, 1), st(5, 2, 2), st(6, 2, 2), st(9, 2, 3), st(9.5, 2, 3), st(20, 3, 4), st(21, 2, 5)}, 0, 10, []float64{1, 0.5}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := steadyGaps(tc.s, 2, tc.warmup, tc.n); !slices.Equal(got, tc.want) {
				t.Errorf("steadyGaps = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ q, want float64 }{{0.5, 5}, {0.9, 9}, {1, 10}, {0, 1}} {
		if got := quantile(xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is 0")
	}
	if !slices.Equal(xs[:3], []float64{5, 1, 4}) {
		t.Error("quantile sorted its input in place")
	}
}

func TestSplitSteady(t *testing.T) {
	steady, event := splitSteady([]string{"edl-live", "torchrun", "ddp"})
	if !slices.Equal(steady, []string{"ddp", "edl-live"}) || !slices.Equal(event, []string{"edl-live", "torchrun"}) {
		t.Errorf("splitSteady = %v, %v", steady, event)
	}
}

func TestSteadyRatiosAgainstDDP(t *testing.T) {
	// runSteady's arithmetic on made-up rounds: the systems fail or not
	// per round; ratios are against ddp's line.
	b := &torchBench{log: &bytes.Buffer{}}
	calls := 0
	fake := func(sys string, _ int) (steadyRun, error) {
		calls++
		if sys == "ddp" {
			return steadyRun{gaps: []float64{0.1, 0.1, 0.1, 0.2}, cpuPerStep: 100 * time.Millisecond}, nil
		}
		return steadyRun{gaps: []float64{0.103, 0.103, 0.103, 0.3}, cpuPerStep: 110 * time.Millisecond}, nil
	}
	out, err := b.steadyRounds(steadyConfig{world: 2, steps: 4, rounds: 2}, []string{"ddp", "edl-live"}, fake)
	if err != nil || len(out) != 2 || calls != 4 {
		t.Fatalf("steadyRounds = %+v, %v after %d calls", out, err, calls)
	}
	live := out[1]
	if live.System != "edl-live" || live.Steps != 8 || live.Rounds != 2 || live.StepMsMedian != 103 || live.StepMsP90 != 300 ||
		*live.RatioVsDDP != 1.03 || *live.RatioP90VsDDP != 1.5 || live.CPUMsPerStep != 110 || *live.RatioCPUVsDDP != 1.1 {
		t.Errorf("edl-live line %+v", live)
	}
	if *out[0].RatioVsDDP != 1 {
		t.Errorf("ddp's ratio %v, want 1", *out[0].RatioVsDDP)
	}
	// A system that fails every round has no line, and the error says which.
	out, err = b.steadyRounds(steadyConfig{world: 2, steps: 4, rounds: 1}, []string{"ddp", "edl-live"}, func(sys string, r int) (steadyRun, error) {
		if sys == "ddp" {
			return steadyRun{}, errors.New("boom")
		}
		return fake(sys, r)
	})
	if len(out) != 1 || out[0].RatioVsDDP != nil || err == nil || !strings.Contains(err.Error(), "ddp steady round 1: boom") {
		t.Errorf("without ddp: %+v, %v", out, err)
	}
}

func TestBenchTorchSteadyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "ddp", "--scenarios", "scale_out"}, "runs only the steady scenario"},
		{[]string{"--mode", "torchrun", "--scenarios", "steady"}, "the steady scenario runs ddp and edl-live"},
		{[]string{"--mode", "ddp", "--scenarios", "steady", "--steady-steps", "0"}, "--steady-steps"},
		{[]string{"--mode", "pytorch"}, `"pytorch" is not one of torchrun, edl-restart, edl-restart-cold, edl-live, ddp`},
	} {
		var out, errb bytes.Buffer
		err := runBenchTorch(context.Background(), Env{}, tc.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}
