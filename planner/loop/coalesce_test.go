package loop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

// Rounds come from the interval or from outside changes, coalesced: not
// from lease renewals, and not from the planner's own writes.
func TestRoundsOnlyOnIntervalOrOutsideChange(t *testing.T) {
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	cl := newFakeCluster(64)
	cfg := DefaultConfig()
	cfg.Prefix, cfg.Holder = r.Prefix, t.Name()
	// A lease long enough that a loaded CI machine renews it in time: a lapse
	// and re-acquisition would rightly start a round.
	cfg.Interval, cfg.LeaseTTL = time.Hour, 900*time.Millisecond
	l, err := New(cfg, store, cl, r.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	var renewals atomic.Int64
	l.testHook = func(p string) {
		if p == "renew" {
			renewals.Add(1)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the first round", func() bool { return l.Rounds() >= 1 })
	quiet := func(what string) {
		t.Helper()
		r0, n := l.Rounds(), renewals.Load()
		waitFor(t, "6 lease renewals", func() bool { return renewals.Load() >= n+6 })
		if got := l.Rounds(); got != r0 {
			t.Fatalf("%s: %d rounds during 6 lease renewals, want none", what, got-r0)
		}
	}
	quiet("idle")
	// A burst of submits: a few rounds, not one each.
	r0 := l.Rounds()
	var ids []string
	for range 20 {
		j, _, err := store.Create(ctx, "t1", exampleSpec(t, 1, 2), "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	waitFor(t, "every job started", func() bool {
		for _, id := range ids {
			if cl.count(id) == 0 {
				return false
			}
		}
		return true
	})
	if n := l.Rounds() - r0; n > 5 {
		t.Fatalf("%d rounds for a burst of 20 submits, want them coalesced", n)
	}
	// The planner's own writes (20 transitions, 20 updates, events) do not
	// wake it again. (A submit's notification may still arrive after the
	// round that already saw the job: let those drain first.)
	n := renewals.Load()
	waitFor(t, "3 lease renewals", func() bool { return renewals.Load() >= n+3 })
	quiet("after its own writes")
	// An outside change does, at once.
	r0 = l.Rounds()
	if _, err := store.Update(ctx, ids[0], func(j *jobs.Job) error { j.Workers.Pinned = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a round for the pin", func() bool { return l.Rounds() > r0 && cl.count(ids[0]) == 1 })
}

// An idle round reads no job from the store and asks the cluster about no
// queued job: the snapshot follows the store's change index.
func TestIdleRoundReadsNothingAndListsNoQueuedJob(t *testing.T) {
	cl := newFakeCluster(1)
	l, store := newTestLoop(t, cl)
	ctx := context.Background()
	for range 50 {
		if _, _, err := store.Create(ctx, "t1", exampleSpec(t, 2, 2), ""); err != nil {
			t.Fatal(err)
		}
	}
	l.Round(ctx) // takes over: lists every job once
	l.Round(ctx) // records why they wait
	seq := l.snap.seq
	calls := cl.workerCalls
	for range 3 {
		if err := l.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if l.snap.seq != seq {
		t.Fatalf("idle rounds wrote jobs (change sequence %d -> %d)", seq, l.snap.seq)
	}
	if n := cl.workerCalls - calls; n != 0 {
		t.Fatalf("idle rounds listed workers %d times for 50 queued jobs, want 0", n)
	}
	// A change shows up in the next round.
	j := l.snap.list()[0]
	if _, err := store.Update(ctx, j.ID, func(cur *jobs.Job) error { cur.Spec.Workers.Min = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	l.Round(ctx)
	if got := l.snap.jobs[j.ID]; got.Spec.Workers.Min != 1 || cl.count(j.ID) != 1 {
		t.Fatalf("after a change: snapshot min %d, workers %d; want 1 and 1", got.Spec.Workers.Min, cl.count(j.ID))
	}
}
