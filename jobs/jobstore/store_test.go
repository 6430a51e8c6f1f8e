package jobstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newStore(t *testing.T) *jobstore.Store {
	t.Helper()
	r := testenv.NewRedis(t)
	return jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
}

func spec(name string, labels map[string]string) jobs.Spec {
	return jobs.Spec{
		Name:    name,
		Workers: jobs.WorkerRange{Min: 1, Max: 4},
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
			Model:   jobs.MLPModel{Hidden: []int{16}},
			Dataset: jobs.SyntheticDataset{Seed: 1, Samples: 1000, Features: 8, Classes: 3, Partitions: 8},
			Epochs:  1, BatchSize: 32, LearningRate: 0.1,
		}},
		Labels: labels,
	}
}

func TestCreateGet(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	j, created, err := s.Create(ctx, "team-a", spec("a", nil), "")
	if err != nil || !created {
		t.Fatalf("Create: %v created=%v", err, created)
	}
	if j.State != jobs.Pending || j.Version != 1 || j.Spec.Priority != jobs.Guaranteed || j.Spec.Checkpoint.Keep != jobs.DefaultKeep {
		t.Errorf("new job: %+v", j)
	}
	got, err := s.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != j.ID || got.Tenant != "team-a" || got.Spec.Name != "a" || !got.CreatedAt.Equal(j.CreatedAt) {
		t.Errorf("Get = %+v, want %+v", got, j)
	}
	for _, id := range []string{"j-nope", "../x", "", "J-UPPER"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
	}
	evs, err := s.Events(ctx, j.ID, "", 10)
	if err != nil || len(evs) != 1 || evs[0].Type != jobs.EventState || evs[0].ID == "" {
		t.Fatalf("events after create: %+v %v", evs, err)
	}
	var ve *jobs.ValidationError
	if _, _, err := s.Create(ctx, "team-a", jobs.Spec{Name: "bad"}, ""); !errors.As(err, &ve) {
		t.Errorf("Create with invalid spec: %v", err)
	}
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	first, created, err := s.Create(ctx, "t", spec("a", nil), "key-1")
	if err != nil || !created {
		t.Fatal(err, created)
	}
	again, created, err := s.Create(ctx, "t", spec("a", nil), "key-1")
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("replay: id %s created=%v err=%v, want %s false nil", again.ID, created, err, first.ID)
	}
	if _, _, err := s.Create(ctx, "t", spec("b", nil), "key-1"); !errors.Is(err, jobs.ErrIdempotencyMismatch) {
		t.Fatalf("different body, same key: %v", err)
	}
	other, created, err := s.Create(ctx, "u", spec("a", nil), "key-1")
	if err != nil || !created || other.ID == first.ID {
		t.Fatalf("same key, other tenant: %v %v", err, created)
	}
	// Concurrent submits with one key make one job.
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, _, err := s.Create(ctx, "t", spec("c", nil), "key-2")
			if err != nil {
				t.Error(err)
			}
			ids[i] = j.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent idempotent creates made several jobs: %v", ids)
		}
	}
}

func TestUpdateNeverLosesWrites(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	j, _, err := s.Create(ctx, "t", spec("a", nil), "")
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.Update(ctx, j.ID, func(j *jobs.Job) error { j.Progress.Step++; return nil }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got, err := s.Get(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Progress.Step != writers*each || got.Version != 1+writers*each {
		t.Errorf("step %d version %d, want %d and %d", got.Progress.Step, got.Version, writers*each, 1+writers*each)
	}
}

func TestTransition(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	j, _, _ := s.Create(ctx, "t", spec("a", nil), "")
	for _, to := range []jobs.State{jobs.Starting, jobs.Running} {
		if _, err := s.Transition(ctx, j.ID, to, "planner"); err != nil {
			t.Fatalf("-> %s: %v", to, err)
		}
	}
	if _, err := s.Transition(ctx, j.ID, jobs.Pending, ""); !errors.Is(err, jobs.ErrInvalidTransition) {
		t.Fatalf("running -> pending: %v", err)
	}
	if _, err := s.Update(ctx, j.ID, func(j *jobs.Job) error { j.State = jobs.Cancelled; return nil }); !errors.Is(err, jobs.ErrInvalidTransition) {
		t.Fatalf("Update running -> cancelled: %v", err)
	}
	active, err := s.ListActive(ctx)
	if err != nil || len(active) != 1 {
		t.Fatalf("active before finish: %d %v", len(active), err)
	}
	done, err := s.Transition(ctx, j.ID, jobs.Succeeded, "all epochs done")
	if err != nil || done.State != jobs.Succeeded || done.Reason != "all epochs done" {
		t.Fatalf("-> succeeded: %+v %v", done, err)
	}
	if active, _ := s.ListActive(ctx); len(active) != 0 {
		t.Errorf("terminal job still active: %+v", active)
	}
	evs, _ := s.Events(ctx, j.ID, "", 100)
	var moves []string
	for _, e := range evs {
		if e.Type == jobs.EventState {
			moves = append(moves, e.Message)
		}
	}
	want := "[submitted pending -> starting starting -> running running -> succeeded]"
	if fmt.Sprint(moves) != want {
		t.Errorf("state events %v, want %s", moves, want)
	}
	if _, err := s.Transition(ctx, "j-missing", jobs.Running, ""); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("missing job: %v", err)
	}
}

func TestSetters(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	j, _, _ := s.Create(ctx, "t", spec("a", nil), "")
	if err := s.SetWorkers(ctx, j.ID, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.SetProgress(ctx, j.ID, jobs.Progress{Epoch: 1, Step: 40, Loss: 0.5, WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	ref := jobs.CheckpointRef{Step: 40, Epoch: 1, URL: "file:///x/40", SizeBytes: 10, CreatedAt: time.Unix(5, 0).UTC()}
	if err := s.SetCheckpoint(ctx, j.ID, ref); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, j.ID)
	if got.Workers.Current != 2 || got.Workers.Target != 3 || got.Progress.Step != 40 || got.LastCheckpoint == nil || *got.LastCheckpoint != ref {
		t.Errorf("after setters: %+v", got)
	}
	evs, _ := s.Events(ctx, j.ID, "", 10)
	if last := evs[len(evs)-1]; last.Type != jobs.EventCheckpoint {
		t.Errorf("last event %+v, want a checkpoint event", last)
	}
}

func TestEventsPagingAndWait(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	j, _, _ := s.Create(ctx, "t", spec("a", nil), "")
	for i := 0; i < 5; i++ {
		if _, err := s.AppendEvent(ctx, j.ID, jobs.Event{Type: jobs.EventScale, Message: fmt.Sprint("e", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AppendEvent(ctx, "j-missing", jobs.Event{Type: jobs.EventError}); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("append to missing job: %v", err)
	}
	var all []jobs.Event
	after := ""
	for {
		page, err := s.Events(ctx, j.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		after = page[len(page)-1].ID
	}
	if len(all) != 6 || all[5].Message != "e4" {
		t.Fatalf("paged events: %+v", all)
	}
	got, err := s.WaitEvents(ctx, j.ID, after, 10, 20*time.Millisecond)
	if err != nil || len(got) != 0 {
		t.Fatalf("wait with nothing new: %v %v", got, err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.AppendEvent(ctx, j.ID, jobs.Event{Type: jobs.EventWorker, Message: "joined"})
	}()
	got, err = s.WaitEvents(ctx, j.ID, after, 10, 5*time.Second)
	if err != nil || len(got) != 1 || got[0].Message != "joined" {
		t.Fatalf("wait for new event: %+v %v", got, err)
	}
	if _, err := s.Events(ctx, j.ID, "bogus", 1); err == nil {
		t.Error("bad after id accepted")
	}
}

func TestSubscribe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newStore(t)
	ch := s.Subscribe(ctx)
	j, _, _ := s.Create(ctx, "t", spec("a", nil), "")
	expect := func(what string) {
		t.Helper()
		select {
		case id := <-ch:
			if id != j.ID {
				t.Fatalf("%s: notified %q, want %q", what, id, j.ID)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no notification", what)
		}
	}
	expect("create")
	if err := s.SetWorkers(ctx, j.ID, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, j.ID, jobs.Cancelling, "user"); err != nil {
		t.Fatal(err)
	}
	expect("cancel") // SetWorkers alone does not notify
	cancel()
	for range ch {
	}
}

// CreateJSON returns the very JSON GetJSON serves for a new job, and none
// for an idempotent replay (whose job is an older one).
func TestCreateJSONMatchesGetJSON(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, key := range []string{"", "k1"} {
		j, raw, created, err := s.CreateJSON(ctx, "team-a", spec("a", map[string]string{"x": "<&>"}), key)
		if err != nil || !created {
			t.Fatalf("CreateJSON(key %q): %v created=%v", key, err, created)
		}
		tenant, stored, err := s.GetJSON(ctx, j.ID)
		if err != nil || tenant != "team-a" || string(stored) != string(raw) {
			t.Errorf("key %q: GetJSON = %q %s %v, CreateJSON gave %s", key, tenant, stored, err, raw)
		}
	}
	j, raw, created, err := s.CreateJSON(ctx, "team-a", spec("a", map[string]string{"x": "<&>"}), "k1")
	if err != nil || created || raw != nil || j.ID == "" {
		t.Errorf("replay: %v created=%v raw=%s", err, created, raw)
	}
}
