package jobstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

func TestFencedStoreRefusesWritesOnceTheFenceMoves(t *testing.T) {
	ctx := context.Background()
	r := testenv.NewRedis(t)
	s := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	key := r.Prefix + "planner:fence"
	j, _, err := s.Create(ctx, "t", spec("a", nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Client.Set(ctx, key, 3, 0).Err(); err != nil {
		t.Fatal(err)
	}
	cur := s.WithFence(key, 3)
	if _, err := cur.Transition(ctx, j.ID, jobs.Starting, "by the holder"); err != nil {
		t.Fatalf("write with the current fence: %v", err)
	}
	if _, err := cur.AppendEvent(ctx, j.ID, jobs.Event{Type: jobs.EventScale, Message: "by the holder"}); err != nil {
		t.Fatalf("event with the current fence: %v", err)
	}
	r.Client.Incr(ctx, key) // another planner took over
	if _, err := cur.Transition(ctx, j.ID, jobs.Suspended, "by the deposed"); !errors.Is(err, jobs.ErrFenced) {
		t.Fatalf("write with a stale fence = %v, want ErrFenced", err)
	}
	if _, err := cur.AppendEvent(ctx, j.ID, jobs.Event{Type: jobs.EventScale, Message: "by the deposed"}); !errors.Is(err, jobs.ErrFenced) {
		t.Fatalf("event with a stale fence = %v, want ErrFenced", err)
	}
	got, _ := s.Get(ctx, j.ID)
	if got.State != jobs.Starting {
		t.Fatalf("state = %s after a fenced write, want starting", got.State)
	}
	// Unfenced writers (the API, workers) are not affected.
	if _, err := s.Transition(ctx, j.ID, jobs.Running, "worker"); err != nil {
		t.Fatal(err)
	}
}

func TestChangedSinceAndFinishedQueue(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a, _, _ := s.Create(ctx, "t", spec("a", nil), "")
	b, _, _ := s.Create(ctx, "t", spec("b", nil), "")
	all, seq, err := s.ChangedSince(ctx, 0)
	if err != nil || len(all) != 2 {
		t.Fatalf("ChangedSince(0) = %d jobs, %v; want 2", len(all), err)
	}
	if none, seq2, _ := s.ChangedSince(ctx, seq); len(none) != 0 || seq2 != seq {
		t.Fatalf("nothing changed: got %d jobs, seq %d -> %d", len(none), seq, seq2)
	}
	if n, _ := s.ChangeSeq(ctx); n != seq {
		t.Fatalf("ChangeSeq = %d, want %d", n, seq)
	}
	s.Transition(ctx, a.ID, jobs.Starting, "")
	ch, seq3, _ := s.ChangedSince(ctx, seq)
	if len(ch) != 1 || ch[0].ID != a.ID || ch[0].State != jobs.Starting || seq3 <= seq {
		t.Fatalf("after one write: %+v seq %d", ch, seq3)
	}
	// b is cancelled: it leaves the change index and waits in finished.
	s.Transition(ctx, b.ID, jobs.Cancelling, "")
	s.Transition(ctx, b.ID, jobs.Cancelled, "")
	ch, _, _ = s.ChangedSince(ctx, 0)
	if len(ch) != 1 || ch[0].ID != a.ID {
		t.Fatalf("live jobs = %+v, want only %s", ch, a.ID)
	}
	fin, err := s.Finished(ctx)
	if err != nil || len(fin) != 1 || fin[0].ID != b.ID {
		t.Fatalf("finished = %+v, %v; want [%s]", fin, err, b.ID)
	}
	// A later write to the terminal job keeps it queued until the planner
	// marks it finished.
	s.Update(ctx, b.ID, func(j *jobs.Job) error { j.Planner = &jobs.PlannerState{TornDown: true}; return nil })
	if fin, _ := s.Finished(ctx); len(fin) != 1 {
		t.Fatalf("finished after a write = %d jobs, want 1", len(fin))
	}
	s.Update(ctx, b.ID, func(j *jobs.Job) error { j.Planner.Finished = true; return nil })
	if fin, _ := s.Finished(ctx); len(fin) != 0 {
		t.Fatalf("finished after the planner's last write = %+v, want none", fin)
	}
	got, _ := s.Get(ctx, b.ID)
	if got.Planner == nil || !got.Planner.TornDown || !got.Planner.Finished {
		t.Fatalf("planner state not kept: %+v", got.Planner)
	}
}
