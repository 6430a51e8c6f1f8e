package sweeploop_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/edl-nomad/edl/planner/sweeploop"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func f(x float64) *float64 { return &x }

type fixture struct {
	t       *testing.T
	ctx     context.Context
	js      *jobstore.Store
	ss      *sweepstore.Store
	metrics *jobmetrics.Log
}

func newFixture(t *testing.T) *fixture {
	r := testenv.NewRedis(t)
	return &fixture{t: t, ctx: context.Background(), js: jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix}),
		ss: sweepstore.New(r.Client, sweepstore.Config{Prefix: r.Prefix}), metrics: jobmetrics.New(r.Client, r.Prefix)}
}

func (fx *fixture) controller() *sweeploop.Controller {
	c, err := sweeploop.New(sweeploop.Config{}, fx.ss, fx.js, fx.metrics, nil, nil)
	if err != nil {
		fx.t.Fatal(err)
	}
	return c
}

func (fx *fixture) round(c *sweeploop.Controller) sweep.Sweep {
	fx.t.Helper()
	if err := c.Round(fx.ctx); err != nil {
		fx.t.Fatal(err)
	}
	return fx.get()
}

func (fx *fixture) get() sweep.Sweep {
	fx.t.Helper()
	act, err := fx.ss.Active(fx.ctx)
	if err != nil {
		fx.t.Fatal(err)
	}
	if len(act) == 1 {
		return act[0]
	}
	fx.t.Fatalf("%d active sweeps", len(act))
	return sweep.Sweep{}
}

// runJob plays the job's workers: running with n of them, losses at
// steps 1..len(losses).
func (fx *fixture) runJob(id string, n int, losses ...float64) {
	fx.t.Helper()
	_, err := fx.js.Update(fx.ctx, id, func(j *jobs.Job) error {
		if j.State == jobs.Pending {
			j.State = jobs.Starting
		}
		j.Workers.Current = n
		j.Planner = &jobs.PlannerState{Throughput: map[int]float64{n: 100 * float64(n)}}
		return nil
	})
	if err == nil {
		_, err = fx.js.Update(fx.ctx, id, func(j *jobs.Job) error {
			if j.State == jobs.Starting {
				j.State = jobs.Running
			}
			return nil
		})
	}
	if err != nil {
		fx.t.Fatal(err)
	}
	pts := make([]jobmetrics.Point, len(losses))
	for i, l := range losses {
		pts[i] = jobmetrics.Point{Step: int64(i + 1), Values: map[string]float64{"loss": l}}
	}
	if err := fx.metrics.Append(fx.ctx, id, pts...); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *fixture) end(id string) {
	fx.t.Helper()
	if _, err := fx.js.Update(fx.ctx, id, func(j *jobs.Job) error {
		j.State, j.Workers.Current = jobs.Cancelled, 0
		return nil
	}); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *fixture) job(id string) jobs.Job {
	fx.t.Helper()
	j, err := fx.js.Get(fx.ctx, id)
	if err != nil {
		fx.t.Fatal(err)
	}
	return j
}

func TestControllerCutsAndGrowsAcrossATakeover(t *testing.T) {
	fx := newFixture(t)
	spec := sweep.Spec{
		Name: "mlp",
		Template: jobs.Spec{Name: "t", Workers: jobs.WorkerRange{Min: 2, Max: 4},
			Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
				Model:   jobs.MLPModel{Hidden: []int{16}},
				Dataset: jobs.SyntheticDataset{Seed: 1, Samples: 1000, Features: 8, Classes: 3, Partitions: 8},
				Epochs:  1, BatchSize: 32, LearningRate: 0.1,
			}}},
		Parameters: map[string]sweep.Parameter{"trainer.builtin.lr": {Type: sweep.LogUniform, Min: f(0.01), Max: f(1)}},
		NumTrials:  2, MaxConcurrent: 2, Seed: 1,
		Metric:    sweep.Metric{Name: "loss", Mode: sweep.Min},
		Scheduler: sweep.Scheduler{Kind: "asha", Grace: 2, Max: 8, ReductionFactor: 2},
	}
	created, _, err := fx.ss.Create(fx.ctx, "team-a", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	c := fx.controller()
	sw := fx.round(c)
	a, b := sw.Trials[0].JobID, sw.Trials[1].JobID
	if a == "" || b == "" || sw.Trials[0].State != sweep.TrialRunning {
		t.Fatalf("trials not started: %+v", sw.Trials)
	}
	ja := fx.job(a)
	if ja.Spec.Labels[sweep.LabelSweep] != created.ID || ja.Workers.Pinned != 2 || ja.Spec.Trainer.Builtin.LearningRate != sw.Trials[0].Params["trainer.builtin.lr"] {
		t.Fatalf("trial job: labels %v pinned %d lr %v", ja.Spec.Labels, ja.Workers.Pinned, ja.Spec.Trainer.Builtin.LearningRate)
	}

	// A successor with an empty cache: no second job per trial.
	c = fx.controller()
	fx.runJob(a, 2, 1, 1)
	fx.runJob(b, 2, 3, 3)
	sw = fx.round(c)
	if sw.Trials[0].JobID != a || sw.Trials[1].State != sweep.TrialCut || sw.Best == nil || sw.Best.Trial != 0 {
		t.Fatalf("after rung 0: %+v best %+v", sw.Trials, sw.Best)
	}
	if st := fx.job(b).State; st != jobs.Cancelling {
		t.Fatalf("cut trial's job: %s", st)
	}
	if n := fx.job(a).Workers.Pinned; n != 2 {
		t.Fatalf("grown before the cut trial's workers left: %d", n)
	}
	fx.end(b)
	sw = fx.round(c)
	if n := fx.job(a).Workers.Pinned; n != 4 || sw.Trials[0].Workers != 4 {
		t.Fatalf("survivor: pinned %d, recorded %d; want 4", n, sw.Trials[0].Workers)
	}
	evs, err := fx.ss.Events(fx.ctx, created.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[sweep.EventType]int{}
	for _, e := range evs {
		seen[e.Type]++
	}
	if seen[sweep.EventStarted] != 2 || seen[sweep.EventCut] != 1 || seen[sweep.EventPromoted] != 1 || seen[sweep.EventGrown] != 1 || seen[sweep.EventBestChanged] != 1 {
		t.Fatalf("events: %v", seen)
	}

	// Trial 0 reaches max: completed, its job stopped; the sweep ends once
	// the job is gone.
	fx.runJob(a, 4, 1, 1, 0.5, 0.5, 0.4, 0.4, 0.3, 0.3)
	sw = fx.round(c)
	if sw.Trials[0].State != sweep.TrialCompleted || fx.job(a).State != jobs.Cancelling {
		t.Fatalf("trial 0 %s job %s", sw.Trials[0].State, fx.job(a).State)
	}
	fx.end(a)
	if err := c.Round(fx.ctx); err != nil {
		t.Fatal(err)
	}
	done, err := fx.ss.Get(fx.ctx, created.ID)
	if err != nil || done.State != sweep.Succeeded || done.Best.Trial != 0 || done.Best.Rung != 2 {
		t.Fatalf("sweep: %s best %+v %v", done.State, done.Best, err)
	}
}

// A trial whose loss diverges (NaN: what a real program reports, through
// the metric log) is cut at once, its job cancelled; once its workers
// are gone the survivor grows into them. The diverged trial was the best
// before: it is not any more. The sweep as stored and its events show
// the NaN (null with non_finite), never a number.
func TestControllerCutsADivergedTrialAndHandsItsWorkersOver(t *testing.T) {
	fx := newFixture(t)
	spec := sweep.Spec{
		Name: "mlp",
		Template: jobs.Spec{Name: "t", Workers: jobs.WorkerRange{Min: 2, Max: 4},
			Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
				Model:   jobs.MLPModel{Hidden: []int{16}},
				Dataset: jobs.SyntheticDataset{Seed: 1, Samples: 1000, Features: 8, Classes: 3, Partitions: 8},
				Epochs:  1, BatchSize: 32, LearningRate: 0.1,
			}}},
		Parameters: map[string]sweep.Parameter{"trainer.builtin.lr": {Type: sweep.LogUniform, Min: f(0.01), Max: f(1)}},
		NumTrials:  2, MaxConcurrent: 2, Seed: 1,
		Metric:    sweep.Metric{Name: "loss", Mode: sweep.Min},
		Scheduler: sweep.Scheduler{Kind: "asha", Grace: 2, Max: 8, ReductionFactor: 2}, // rungs 2, 4, 8
	}
	created, _, err := fx.ss.Create(fx.ctx, "team-a", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	c := fx.controller()
	sw := fx.round(c)
	a, b := sw.Trials[0].JobID, sw.Trials[1].JobID

	// Both pass rung 0; trial 1 is the best.
	fx.runJob(a, 2, 3, 3)
	fx.runJob(b, 2, 1, 1)
	sw = fx.round(c)
	if sw.Trials[0].State != sweep.TrialRunning || sw.Trials[1].State != sweep.TrialRunning || sw.Best == nil || sw.Best.Trial != 1 {
		t.Fatalf("after rung 0: %+v best %+v", sw.Trials, sw.Best)
	}

	// Trial 1's loss diverges at step 3, before rung 1 (step 4).
	if err := fx.metrics.Append(fx.ctx, b, jobmetrics.Point{Step: 3, Values: map[string]float64{"loss": math.NaN()}}); err != nil {
		t.Fatal(err)
	}
	sw = fx.round(c)
	tr := sw.Trials[1]
	if tr.State != sweep.TrialCut || len(tr.Results) != 2 || !math.IsNaN(tr.Results[1].Value) || tr.LastMetric == nil || !math.IsNaN(tr.LastMetric.Value) {
		t.Fatalf("diverged trial: %+v", tr)
	}
	if st := fx.job(b).State; st != jobs.Cancelling {
		t.Fatalf("diverged trial's job: %s", st)
	}
	if sw.Best == nil || sw.Best.Trial != 0 {
		t.Fatalf("best: want trial 0, got %+v", sw.Best)
	}
	if n := fx.job(a).Workers.Pinned; n != 2 {
		t.Fatalf("grown before the cut trial's workers left: %d", n)
	}
	fx.end(b)
	sw = fx.round(c)
	if n := fx.job(a).Workers.Pinned; n != 4 || sw.Trials[0].Workers != 4 {
		t.Fatalf("survivor: pinned %d, recorded %d; want 4 (the diverged trial's 2 handed over)", n, sw.Trials[0].Workers)
	}

	// As the API shows it.
	b1, err := json.Marshal(sw.Trials[1])
	if err != nil || !strings.Contains(string(b1), `{"rung":1,"step":3,"value":null,"non_finite":"NaN"}`) {
		t.Fatalf("trial JSON: %s %v", b1, err)
	}
	evs, err := fx.ss.Events(fx.ctx, created.ID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var cut *sweep.Event
	for i, e := range evs {
		if e.Type == sweep.EventCut {
			cut = &evs[i]
		}
	}
	if cut == nil || *cut.Trial != 1 || cut.Data["non_finite"] != "NaN" || cut.Data["value"] != nil || !strings.Contains(cut.Message, "loss NaN") {
		t.Fatalf("cut event: %+v", cut)
	}
}
