package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/redis/go-redis/v9"
)

// TestWorkerACLReachesOnlyItsJob logs in as job A's workers and tries
// what they need (A's keys and channel, the job store's scoped writes)
// and what they must not (B's keys and channel, the global indexes,
// listing commands).
func TestWorkerACLReachesOnlyItsJob(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	admin := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	a, _, err := admin.Create(ctx, "alice", exampleSpec(t, 1, 2), "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := admin.Create(ctx, "bob", exampleSpec(t, 1, 2), "")
	if err != nil {
		t.Fatal(err)
	}
	acl, err := NewWorkerACL(ctx, r.Client, r.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := acl.Ensure(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := acl.Ensure(ctx, a.ID); err != nil { // idempotent
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acl.Remove(ctx, a.ID) })
	user, pass := acl.Credentials(a.ID)
	if u2, p2 := acl.Credentials(a.ID); u2 != user || p2 != pass {
		t.Fatal("credentials are not stable")
	}
	if _, pb := acl.Credentials(b.ID); pb == pass {
		t.Fatal("two jobs share a password")
	}
	w := redis.NewClient(&redis.Options{Addr: r.Addr, Username: user, Password: pass})
	defer w.Close()
	own := r.Prefix + "{" + a.ID + "}:"
	other := r.Prefix + "{" + b.ID + "}:"
	allowed := []struct {
		name string
		run  func() error
	}{
		{"set own key", func() error { return w.Set(ctx, own+"x", "1", 0).Err() }},
		{"script on own keys", func() error {
			return redis.NewScript(`return redis.call('INCR', KEYS[1])`).Run(ctx, w, []string{own + "n"}).Err()
		}},
		{"publish own channel", func() error { return w.Publish(ctx, own+"events", "x").Err() }},
	}
	for _, c := range allowed {
		if err := c.run(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// The worker's own store: progress, events, state, checkpoint.
	ws := jobstore.New(w, jobstore.Config{Prefix: r.Prefix, JobScoped: true, ProgressEvery: time.Millisecond})
	if _, err := ws.AppendEvent(ctx, a.ID, jobs.Event{Type: jobs.EventWorker, Message: "hi"}); err != nil {
		t.Errorf("scoped AppendEvent: %v", err)
	}
	// Two reports an interval apart are two points of the history (its
	// script asks Redis the TIME for the second: once refused to this
	// login, so that every job's history held its first point only).
	for _, step := range []int64{3, 4} {
		if err := ws.SetProgress(ctx, a.ID, jobs.Progress{Step: step}); err != nil {
			t.Errorf("scoped SetProgress: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if pts, err := ws.ProgressHistory(ctx, a.ID, "", 0); err != nil || len(pts) != 2 {
		t.Errorf("progress history through the job's login: %+v (%v), want steps 3 and 4", pts, err)
	}
	if _, err := ws.Get(ctx, b.ID); err == nil {
		t.Error("read job B through job A's login")
	}
	refused := []struct {
		name string
		run  func() error
	}{
		{"get other job", func() error { return w.HGet(ctx, other+"job", "d").Err() }},
		{"write other job", func() error { return w.HSet(ctx, other+"job", "d", "x").Err() }},
		{"other events", func() error { return w.XRange(ctx, other+"events", "-", "+").Err() }},
		{"active index", func() error { return w.ZRange(ctx, r.Prefix+"active", 0, -1).Err() }},
		{"acl secret", func() error { return w.Get(ctx, r.Prefix+"acl:secret").Err() }},
		{"scan", func() error { return w.Scan(ctx, 0, "*", 100).Err() }},
		{"keys", func() error { return w.Keys(ctx, "*").Err() }},
		{"pubsub channels", func() error { return w.PubSubChannels(ctx, "*").Err() }},
		{"client list", func() error { return w.ClientList(ctx).Err() }},
		{"publish other", func() error { return w.Publish(ctx, other+"events", "x").Err() }},
		{"script on other keys", func() error {
			return redis.NewScript(`return redis.call('GET', KEYS[1])`).Run(ctx, w, []string{other + "job"}).Err()
		}},
		{"undeclared key in a script", func() error {
			return redis.NewScript(`return redis.call('HGET', ARGV[1], 'd')`).Run(ctx, w, nil, other+"job").Err()
		}},
		{"config", func() error { return w.ConfigGet(ctx, "*").Err() }},
		{"acl list", func() error { return w.Do(ctx, "ACL", "LIST").Err() }},
	}
	for _, c := range refused {
		// NOPERM; in a script, Redis 7.0 says "can't access" instead.
		if err := c.run(); err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "can't access") {
			t.Errorf("%s: err %v, want NOPERM", c.name, err)
		}
	}
	ps := w.Subscribe(ctx, other+"events")
	if _, err := ps.Receive(ctx); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("subscribe to the other job's channel: err %v, want NOPERM", err)
	}
	ps.Close()
	if err := acl.Remove(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := redis.NewClient(&redis.Options{Addr: r.Addr, Username: user, Password: pass}).Ping(ctx).Err(); err == nil {
		t.Error("the removed user still logs in")
	}
}

// TestSnapshotCatchesUpWithScopedWrites: what a job-scoped store (a
// worker's) writes reaches the planner's snapshot, and a job it made
// terminal is settled into the finished queue, also by a planner that
// starts afterwards.
func TestSnapshotCatchesUpWithScopedWrites(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	admin := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	scoped := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix, JobScoped: true})
	a, _, _ := admin.Create(ctx, "alice", exampleSpec(t, 1, 2), "")
	b, _, _ := admin.Create(ctx, "alice", exampleSpec(t, 1, 2), "")
	for _, id := range []string{a.ID, b.ID} {
		if _, err := admin.Transition(ctx, id, jobs.Starting, "placed"); err != nil {
			t.Fatal(err)
		}
	}
	var s snapshot
	if err := s.refresh(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if err := scoped.SetProgress(ctx, a.ID, jobs.Progress{Step: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := scoped.Transition(ctx, b.ID, jobs.Failed, "program failed"); err != nil {
		t.Fatal(err)
	}
	if err := s.refresh(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if got := s.jobs[a.ID]; got == nil || got.Progress.Step != 7 {
		t.Errorf("snapshot of %s: %+v, want step 7", a.ID, got)
	}
	if _, ok := s.jobs[b.ID]; ok {
		t.Errorf("terminal job %s still in the snapshot", b.ID)
	}
	fin, err := admin.Finished(ctx)
	if err != nil || len(fin) != 1 || fin[0].ID != b.ID {
		t.Fatalf("finished %v (%v), want %s", fin, err, b.ID)
	}
	// A terminal write no planner saw: the next planner's full read settles it.
	if _, err := scoped.Transition(ctx, a.ID, jobs.Failed, "program failed"); err != nil {
		t.Fatal(err)
	}
	var fresh snapshot
	if err := fresh.refresh(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if fin, _ := admin.Finished(ctx); len(fin) != 2 {
		t.Errorf("finished %v, want both jobs", fin)
	}
}

// authFake records Ensure and Remove.
type authFake struct{ ensured, removed []string }

func (a *authFake) Ensure(_ context.Context, id string) error {
	a.ensured = append(a.ensured, id)
	return nil
}
func (a *authFake) Remove(_ context.Context, id string) error {
	a.removed = append(a.removed, id)
	return nil
}

// workersCluster answers Workers from a map; the rest is a no-op.
type workersCluster struct {
	Cluster
	ws map[string][]jobs.Worker
}

func (c *workersCluster) Workers(_ context.Context, id string) ([]jobs.Worker, error) {
	return c.ws[id], nil
}
func (c *workersCluster) Teardown(context.Context, string) error             { return nil }
func (c *workersCluster) Scale(context.Context, jobs.Job, int, string) error { return nil }
func (c *workersCluster) Capacity(context.Context) (jobs.Capacity, error) {
	return jobs.Capacity{}, nil
}

// TestAuthClusterRemovesTheUserOnceWorkersAreGone: a job's user is made
// before its workers start and outlives a teardown until its last
// (stopping) worker is gone, or authLinger passed.
func TestAuthClusterRemovesTheUserOnceWorkersAreGone(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	inner := &workersCluster{ws: map[string][]jobs.Worker{}}
	auth := &authFake{}
	c := newAuthCluster(inner, auth, func() time.Time { return now })
	if err := c.Scale(ctx, jobs.Job{ID: "a"}, 2, ""); err != nil {
		t.Fatal(err)
	}
	if len(auth.ensured) != 1 || auth.ensured[0] != "a" {
		t.Fatalf("ensured %v before the workers start, want [a]", auth.ensured)
	}
	inner.ws["a"] = []jobs.Worker{{ID: "w1", State: jobs.WorkerStopping}}
	if err := c.Teardown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Capacity(ctx); err != nil {
		t.Fatal(err)
	}
	if len(auth.removed) != 0 {
		t.Fatalf("removed %v while a worker is still stopping", auth.removed)
	}
	inner.ws["a"] = []jobs.Worker{{ID: "w1", State: jobs.WorkerComplete}}
	if _, err := c.Capacity(ctx); err != nil {
		t.Fatal(err)
	}
	if len(auth.removed) != 1 || auth.removed[0] != "a" {
		t.Fatalf("removed %v once the workers are gone, want [a]", auth.removed)
	}
	// A worker that never stops: removed after authLinger.
	_ = c.Scale(ctx, jobs.Job{ID: "b"}, 1, "")
	inner.ws["b"] = []jobs.Worker{{ID: "w2", State: jobs.WorkerRunning}}
	_ = c.Teardown(ctx, "b")
	now = now.Add(authLinger)
	if _, err := c.Capacity(ctx); err != nil {
		t.Fatal(err)
	}
	if len(auth.removed) != 2 || auth.removed[1] != "b" {
		t.Fatalf("removed %v after authLinger, want [a b]", auth.removed)
	}
}
