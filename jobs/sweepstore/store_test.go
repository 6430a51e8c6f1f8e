package sweepstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/jobs/sweepstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func f(x float64) *float64 { return &x }

func spec() sweep.Spec {
	return sweep.Spec{
		Name: "mlp",
		Template: jobs.Spec{Name: "t", Workers: jobs.WorkerRange{Min: 1, Max: 2},
			Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
				Model:   jobs.MLPModel{Hidden: []int{16}},
				Dataset: jobs.SyntheticDataset{Seed: 1, Samples: 1000, Features: 8, Classes: 3, Partitions: 8},
				Epochs:  1, BatchSize: 32, LearningRate: 0.1,
			}}},
		Parameters: map[string]sweep.Parameter{"trainer.builtin.lr": {Type: sweep.LogUniform, Min: f(0.01), Max: f(1)}},
		NumTrials:  4, MaxConcurrent: 2, Seed: 1,
		Metric:    sweep.Metric{Name: "loss", Mode: sweep.Min},
		Scheduler: sweep.Scheduler{Kind: "asha", Grace: 5, Max: 20},
	}
}

func TestCreateGetListUpdate(t *testing.T) {
	ctx := context.Background()
	r := testenv.NewRedis(t)
	s := sweepstore.New(r.Client, sweepstore.Config{Prefix: r.Prefix})

	sw, created, err := s.Create(ctx, "team-a", spec(), "k1")
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if sw.State != sweep.Running || len(sw.Trials) != 4 || sw.Spec.Scheduler.ReductionFactor != 4 || sw.Trials[0].State != sweep.TrialPending {
		t.Fatalf("new sweep: %+v", sw)
	}
	again, created, err := s.Create(ctx, "team-a", spec(), "k1")
	if err != nil || created || again.ID != sw.ID {
		t.Fatalf("replay: %s created=%v %v", again.ID, created, err)
	}
	other := spec()
	other.Seed = 2
	if _, _, err := s.Create(ctx, "team-a", other, "k1"); !errors.Is(err, jobs.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other spec: %v", err)
	}
	bad := spec()
	bad.NumTrials = 0
	var ve *jobs.ValidationError
	if _, _, err := s.Create(ctx, "team-a", bad, ""); !errors.As(err, &ve) || ve.Fields[0].Field != "num_trials" {
		t.Fatalf("invalid: %v", err)
	}

	second, _, err := s.Create(ctx, "team-a", other, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, "team-b", spec(), ""); err != nil {
		t.Fatal(err)
	}
	page, next, err := s.List(ctx, "team-a", 1, "")
	if err != nil || len(page) != 1 || page[0].ID != second.ID || next == "" {
		t.Fatalf("first page: %v next=%q %v", page, next, err)
	}
	page, next, err = s.List(ctx, "team-a", 1, next)
	if err != nil || len(page) != 1 || page[0].ID != sw.ID || next != "" {
		t.Fatalf("second (last) page: %v next=%q %v", page, next, err)
	}

	act, err := s.Active(ctx)
	if err != nil || len(act) != 3 {
		t.Fatalf("active: %d %v", len(act), err)
	}
	up, err := s.Update(ctx, sw.ID, func(x *sweep.Sweep) ([]sweep.Event, error) {
		x.State = sweep.Cancelled
		return []sweep.Event{{Type: sweep.EventState, Message: "running -> cancelled"}}, nil
	})
	if err != nil || up.Version != 2 {
		t.Fatalf("update: %v %v", up.Version, err)
	}
	if act, _ := s.Active(ctx); len(act) != 2 {
		t.Fatalf("a terminal sweep stays active: %d", len(act))
	}
	evs, err := s.Events(ctx, sw.ID, "", 10)
	if err != nil || len(evs) != 2 || evs[0].Type != sweep.EventSubmitted || evs[1].Type != sweep.EventState {
		t.Fatalf("events: %+v %v", evs, err)
	}
	if evs, _ := s.Events(ctx, sw.ID, evs[0].ID, 10); len(evs) != 1 {
		t.Fatalf("events after the first: %+v", evs)
	}
	if _, err := s.Get(ctx, "s-nope"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}
