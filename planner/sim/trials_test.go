package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/planner/sweepsim"
)

// exampleSweep is examples/sweep.json: 16 trials, 4 at once, workers
// 1..4, ASHA rungs at 20, 80 and 320 steps.
func exampleSweep(t *testing.T) sweep.Spec {
	t.Helper()
	s, err := sweep.ReadSpecFile(filepath.Join("..", "..", "examples", "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sweepsBeside is a 16-GPU cluster with a small load of ordinary jobs
// (1-4 GPUs, 1-3 h, one every 10 minutes) and three sweeps half an hour
// apart (a step 10 s at one worker: a trial that runs to the end takes
// 53 minutes at one GPU).
func sweepsBeside(t *testing.T, static bool) Options {
	o := DefaultOptions(Elastic)
	o.GPUs, o.GPUsPerNode, o.StaticTrials = 16, 8, static
	for k := range 3 {
		o.Sweeps = append(o.Sweeps, SweepArrival{ID: fmt.Sprintf("sweep%d", k), Tenant: "search", Submit: float64(k) * 1800,
			Spec: exampleSweep(t), StepS: 10, Curves: sweepsim.NewSeeded(uint64(k + 1))})
	}
	return o
}

func ordinaryJobs() []TraceJob {
	var tr []TraceJob
	for k := range 24 {
		tr = append(tr, TraceJob{ID: fmt.Sprintf("job%02d", k), Tenant: "t", Submit: float64(k) * 600,
			GPUs: 1 + k%4, Duration: 3600 * float64(1+k%3), Priority: jobs.Guaranteed})
	}
	return tr
}

// Sweeps run beside ordinary jobs on one cluster: every sweep ends with
// each trial cut or completed, the trials of the static run never grow,
// and handing cut trials' GPUs to the survivors ends the sweeps sooner.
func TestSweepsBesideTraceJobs(t *testing.T) {
	ctx := context.Background()
	el, err := Run(ctx, ordinaryJobs(), sweepsBeside(t, false))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Run(ctx, ordinaryJobs(), sweepsBeside(t, true))
	if err != nil {
		t.Fatal(err)
	}
	if len(el.Sweeps) != 3 || len(st.Sweeps) != 3 {
		t.Fatalf("sweep results: %d elastic, %d static; want 3 each", len(el.Sweeps), len(st.Sweeps))
	}
	var elSpan, stSpan float64
	grown := 0
	for k := range 3 {
		e, s := el.Sweeps[k], st.Sweeps[k]
		t.Logf("%s: elastic makespan %.0f s, %.0f GPU-s, best %d (%.4f), grown %d, max %d; static %.0f s, %.0f GPU-s, best %d (%.4f)",
			e.ID, e.MakespanS, e.GPUSeconds, e.BestIndex, e.BestMetric, e.Grown, e.MaxTrialWorkers, s.MakespanS, s.GPUSeconds, s.BestIndex, s.BestMetric)
		for _, r := range []SweepResult{e, s} {
			if r.State != sweep.Succeeded || r.Cut+r.Completed != 16 || r.BestIndex < 0 || !(r.MakespanS > 0) {
				t.Errorf("%s: %s, %d cut + %d completed, best %d, makespan %.0f; want succeeded, 16 ended, a best trial",
					r.ID, r.State, r.Cut, r.Completed, r.BestIndex, r.MakespanS)
			}
		}
		if s.MaxTrialWorkers != 1 || s.Grown != 0 {
			t.Errorf("%s static: trials up to %d workers, %d grown; want 1 and none", s.ID, s.MaxTrialWorkers, s.Grown)
		}
		elSpan += e.MakespanS
		stSpan += s.MakespanS
		grown += e.Grown
	}
	if grown == 0 || !(elSpan < stSpan) {
		t.Errorf("elastic trials grown %d times, sweeps' makespans %.0f s against static %.0f s: want growth and shorter sweeps", grown, elSpan, stSpan)
	}
	if el.Jobs != 24 || st.Jobs != 24 || !(el.AvgJCT > 0) {
		t.Errorf("ordinary jobs: %d and %d, avg JCT %.0f s; want the 24 trace jobs alone in the job figures", el.Jobs, st.Jobs, el.AvgJCT)
	}
	t.Logf("ordinary jobs' avg JCT: elastic trials %.0f s, static trials %.0f s", el.AvgJCT, st.AvgJCT)
	again, err := Run(ctx, ordinaryJobs(), sweepsBeside(t, false))
	if err != nil || again.Sweeps[2].MakespanS != el.Sweeps[2].MakespanS || again.AvgJCT != el.AvgJCT {
		t.Errorf("a second run differs: %v %+v vs %+v", err, again.Sweeps[2], el.Sweeps[2])
	}
}

// A sweep the cluster cannot run, or one missing what the simulation
// needs, is refused with its index and the field named.
func TestSweepArrivalValidation(t *testing.T) {
	for _, c := range []struct {
		change func(*SweepArrival)
		want   string
	}{
		{func(a *SweepArrival) { a.StepS = 0 }, "step_s 0"},
		{func(a *SweepArrival) { a.Curves = nil }, "no learning curves"},
		{func(a *SweepArrival) { a.Spec.Template.Workers.Min, a.Spec.Template.Workers.Max = 32, 32 }, "more than the cluster's 16 GPUs"},
		{func(a *SweepArrival) { a.Spec.Scheduler.Unit = sweep.UnitEpochs }, "steps_per_epoch must be positive"},
		{func(a *SweepArrival) { a.Spec.NumTrials = 0 }, "num_trials"},
	} {
		o := sweepsBeside(t, false)
		c.change(&o.Sweeps[1])
		_, err := Run(context.Background(), ordinaryJobs(), o)
		if err == nil || !strings.Contains(err.Error(), "sweep 1 (sweep1)") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming sweep 1 and %q, got %v", c.want, err)
		}
	}
}

// A sweep that outlasts every trace job ends the run: its last round,
// with nothing left, failed it as "stuck ... with 0 jobs waiting".
func TestSweepOutlastingTheTraceEndsTheRun(t *testing.T) {
	o := DefaultOptions(Elastic)
	o.GPUs, o.GPUsPerNode = 7, 8
	o.Sweeps = []SweepArrival{{ID: "sweep0", Tenant: "search", Spec: exampleSweep(t), StepS: 10, Curves: sweepsim.NewSeeded(1)}}
	tr := []TraceJob{{ID: "short", Tenant: "t", Submit: 60, GPUs: 3, Duration: 120, Priority: jobs.Guaranteed}}
	r, err := Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sweeps) != 1 || !r.Sweeps[0].State.Terminal() || r.Jobs != 1 {
		t.Errorf("jobs %d, sweeps %+v", r.Jobs, r.Sweeps)
	}
}

// GPU utilisation counts the GPU time the trials held, so it must span
// their time too: one short trace job beside a sweep that runs far longer
// once reported the trials' GPU seconds over the trace job's minute alone
// (gpu_util 8.2 on 8 GPUs).
func TestGPUUtilSpansTheSweepsToo(t *testing.T) {
	o := DefaultOptions(Elastic)
	o.GPUs, o.GPUsPerNode = 8, 8
	o.Sweeps = []SweepArrival{{ID: "sweep0", Tenant: "search", Spec: exampleSweep(t), StepS: 10, Curves: sweepsim.NewSeeded(1)}}
	tr := []TraceJob{{ID: "short", Tenant: "t", Submit: 0, GPUs: 1, Duration: 100, Priority: jobs.Guaranteed}}
	r, err := Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if !(r.GPUUtil > 0 && r.GPUUtil <= 1) {
		t.Errorf("gpu_util %g (trace makespan %.0f s, sweep makespan %.0f s): want in (0, 1]", r.GPUUtil, r.Makespan, r.Sweeps[0].MakespanS)
	}
	if !(r.Makespan < 200) {
		t.Errorf("makespan %.0f s: want the trace job's alone", r.Makespan)
	}
}
