package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// loopback lets callbacks reach the tests' httptest receivers.
var loopback, _ = ParseAllow("127.0.0.0/8,::1")

// fakeCluster is a one-node cluster whose workers run the moment they are
// asked for and vanish the moment they are stopped.
type fakeCluster struct {
	mu        sync.Mutex
	slots     int
	counts    map[string]int
	scales    []string
	teardowns []string
	failScale error
	// stops records StopWorker calls as "job/worker"; a stopped worker is
	// replaced at once by one with a new ID (repl counts per index).
	stops    []string
	repl     map[string]map[int]int
	failStop error
	// exits, when set for a job, makes its workers all exited with these
	// codes (in index order).
	exits map[string][]int
	// workerCalls counts Workers calls.
	workerCalls int
}

// exit makes every worker of job exit with codes.
func (f *fakeCluster) exit(job string, codes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exits == nil {
		f.exits = map[string][]int{}
	}
	f.exits[job] = codes
	delete(f.counts, job)
}

// teardownsOf counts Teardown calls for job.
func (f *fakeCluster) teardownsOf(job string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, id := range f.teardowns {
		if id == job {
			n++
		}
	}
	return n
}

func newFakeCluster(slots int) *fakeCluster {
	return &fakeCluster{slots: slots, counts: map[string]int{}, repl: map[string]map[int]int{}}
}

func (f *fakeCluster) Capacity(ctx context.Context) (jobs.Capacity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := 0
	for _, n := range f.counts {
		used += n
	}
	return jobs.Capacity{Nodes: []jobs.Node{{ID: "n1", CPUSlots: f.slots, FreeCPUSlots: f.slots - used}}}, nil
}

func (f *fakeCluster) Workers(ctx context.Context, jobID string) ([]jobs.Worker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workerCalls++
	var ws []jobs.Worker
	if codes, ok := f.exits[jobID]; ok {
		for i, c := range codes {
			st := jobs.WorkerComplete
			if c != 0 {
				st = jobs.WorkerFailed
			}
			ws = append(ws, jobs.Worker{ID: f.workerIDLocked(jobID, i), JobID: jobID, Index: i, Node: "n1", State: st, ExitCode: &c})
		}
		return ws, nil
	}
	for i := 0; i < f.counts[jobID]; i++ {
		ws = append(ws, jobs.Worker{ID: f.workerIDLocked(jobID, i), JobID: jobID, Index: i, Node: "n1", State: jobs.WorkerRunning})
	}
	return ws, nil
}

// workerIDLocked is the ID of the worker at index i: "job-i", then
// "job-i.rN" after its N-th replacement.
func (f *fakeCluster) workerIDLocked(jobID string, i int) string {
	if n := f.repl[jobID][i]; n > 0 {
		return fmt.Sprintf("%s-%d.r%d", jobID, i, n)
	}
	return fmt.Sprintf("%s-%d", jobID, i)
}

func (f *fakeCluster) Scale(ctx context.Context, job jobs.Job, count int, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failScale != nil {
		return f.failScale
	}
	if f.counts[job.ID] != count {
		f.scales = append(f.scales, fmt.Sprintf("%s=%d", job.ID, count))
	}
	f.counts[job.ID] = count
	return nil
}

func (f *fakeCluster) StopWorker(ctx context.Context, jobID, workerID, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failStop != nil {
		return f.failStop
	}
	for i := 0; i < f.counts[jobID]; i++ {
		if f.workerIDLocked(jobID, i) == workerID {
			f.stops = append(f.stops, jobID+"/"+workerID)
			if f.repl[jobID] == nil {
				f.repl[jobID] = map[int]int{}
			}
			f.repl[jobID][i]++
			return nil
		}
	}
	return fmt.Errorf("stop worker %s of %s: unknown worker", workerID, jobID)
}

func (f *fakeCluster) stopped() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stops...)
}

func (f *fakeCluster) Teardown(ctx context.Context, jobID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.counts, jobID)
	delete(f.exits, jobID)
	f.teardowns = append(f.teardowns, jobID)
	return nil
}

func (f *fakeCluster) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[id]
}

func exampleSpec(t *testing.T, min, max int) jobs.Spec {
	t.Helper()
	data, err := os.ReadFile("../../examples/job.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := jobs.DecodeSpec(data)
	if err != nil {
		t.Fatal(err)
	}
	spec.Workers = jobs.WorkerRange{Min: min, Max: max}
	return spec
}

func newTestLoop(t *testing.T, cl Cluster, opts ...func(*Config)) (*Loop, *jobstore.Store) {
	t.Helper()
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	cfg := DefaultConfig()
	cfg.Prefix = r.Prefix
	cfg.Holder = t.Name()
	for _, o := range opts {
		o(&cfg)
	}
	l, err := New(cfg, store, cl, r.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l, store
}

func TestRoundGrowsJobsToCapacityAndRecordsEvents(t *testing.T) {
	cl := newFakeCluster(4)
	l, store := newTestLoop(t, cl)
	ctx := context.Background()
	a, _, err := store.Create(ctx, "t1", exampleSpec(t, 1, 3), "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := store.Create(ctx, "t2", exampleSpec(t, 1, 3), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cl.count(a.ID) + cl.count(b.ID); got != 4 {
		t.Fatalf("workers handed out = %d (a=%d b=%d), want all 4 slots", got, cl.count(a.ID), cl.count(b.ID))
	}
	if cl.count(a.ID) < 1 || cl.count(b.ID) < 1 {
		t.Fatalf("a job got no worker: a=%d b=%d", cl.count(a.ID), cl.count(b.ID))
	}
	ja, _ := store.Get(ctx, a.ID)
	if ja.State != jobs.Starting || ja.Workers.Target != cl.count(a.ID) {
		t.Fatalf("job a = state %s target %d, want starting and %d", ja.State, ja.Workers.Target, cl.count(a.ID))
	}
	evs, _ := store.Events(ctx, a.ID, "", 100)
	var scaled bool
	for _, e := range evs {
		if e.Type == jobs.EventScale && e.Message != "" {
			scaled = true
		}
	}
	if !scaled {
		t.Fatalf("no scale event with a reason: %+v", evs)
	}
	// A second round with nothing new changes nothing.
	before := len(cl.scales)
	if err := l.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if len(cl.scales) != before {
		t.Fatalf("idle round rescaled: %v", cl.scales[before:])
	}
}

func TestPendingJobShowsWhyItWaits(t *testing.T) {
	cl := newFakeCluster(2)
	l, store := newTestLoop(t, cl)
	ctx := context.Background()
	big, _, _ := store.Create(ctx, "t1", exampleSpec(t, 3, 3), "")
	if err := l.Round(ctx); err != nil {
		t.Fatal(err)
	}
	j, _ := store.Get(ctx, big.ID)
	if j.State != jobs.Pending || j.Reason == "" || cl.count(big.ID) != 0 {
		t.Fatalf("job needing 3 of 2 slots: state %s reason %q workers %d; want pending with a reason", j.State, j.Reason, cl.count(big.ID))
	}
}

func TestCancelTearsDownThenCancelled(t *testing.T) {
	cl := newFakeCluster(4)
	l, store := newTestLoop(t, cl)
	ctx := context.Background()
	a, _, _ := store.Create(ctx, "t1", exampleSpec(t, 1, 2), "")
	l.Round(ctx)
	if cl.count(a.ID) == 0 {
		t.Fatal("job got no workers")
	}
	if _, err := store.Transition(ctx, a.ID, jobs.Cancelling, "by test"); err != nil {
		t.Fatal(err)
	}
	if err := l.Round(ctx); err != nil {
		t.Fatal(err)
	}
	j, _ := store.Get(ctx, a.ID)
	if j.State != jobs.Cancelled || cl.count(a.ID) != 0 {
		t.Fatalf("after cancel: state %s workers %d, want cancelled and 0", j.State, cl.count(a.ID))
	}
}

func TestFinishedJobIsTornDown(t *testing.T) {
	cl := newFakeCluster(4)
	l, store := newTestLoop(t, cl)
	ctx := context.Background()
	a, _, _ := store.Create(ctx, "t1", exampleSpec(t, 1, 2), "")
	l.Round(ctx)
	store.Transition(ctx, a.ID, jobs.Running, "")
	store.Transition(ctx, a.ID, jobs.Succeeded, "")
	l.Round(ctx)
	sort.Strings(cl.teardowns)
	if len(cl.teardowns) != 1 || cl.teardowns[0] != a.ID {
		t.Fatalf("teardowns = %v, want [%s]", cl.teardowns, a.ID)
	}
}

// TestSucceededJobJoinsTheServiceHistory: the service a planner counted
// for a job its workers ended goes into the store's history once, from
// the round that cleans the job up, even though the record was not saved
// since; a cancelled job adds nothing.
func TestSucceededJobJoinsTheServiceHistory(t *testing.T) {
	cl := newFakeCluster(4)
	now := at0
	l, store := newTestLoop(t, cl, func(c *Config) { c.Now = func() time.Time { return now } })
	ctx := context.Background()
	a, _, _ := store.Create(ctx, "t1", exampleSpec(t, 2, 2), "")
	b, _, _ := store.Create(ctx, "t1", exampleSpec(t, 1, 1), "")
	for range 3 { // 2 workers for 2 x 5 s, less than SaveEvery
		if err := l.Round(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(5 * time.Second)
	}
	store.Transition(ctx, a.ID, jobs.Running, "")
	store.Transition(ctx, a.ID, jobs.Succeeded, "the workers' end")
	store.Transition(ctx, b.ID, jobs.Cancelling, "by test")
	for range 3 {
		if err := l.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.ServiceHistory(ctx)
	if err != nil || len(got) != 1 || got[0] != 20 {
		t.Fatalf("service history %v, %v; want [20] (2 workers x 10 s)", got, err)
	}
	if j, _ := store.Get(ctx, a.ID); j.Planner == nil || !j.Planner.Finished || j.Planner.AttainedGPUSeconds != 20 {
		t.Fatalf("finished record's planner state %+v; want finished with 20 GPU seconds", j.Planner)
	}
	// The loop read the history again after the round that cleaned up,
	// and no more once nothing was left to clean up.
	if len(l.service) != 1 || l.service[0] != 20 || l.serviceDue {
		t.Fatalf("the loop's history %v (due %v); want [20], not due", l.service, l.serviceDue)
	}
}

func TestScaleErrorBecomesEventAndRoundConverges(t *testing.T) {
	cl := newFakeCluster(4)
	l, store := newTestLoop(t, cl)
	ctx := context.Background()
	a, _, _ := store.Create(ctx, "t1", exampleSpec(t, 1, 2), "")
	cl.failScale = fmt.Errorf("nomad: 500 boom")
	if err := l.Round(ctx); err == nil {
		t.Fatal("round with a failing cluster: want error")
	}
	evs, _ := store.Events(ctx, a.ID, "", 100)
	found := false
	for _, e := range evs {
		found = found || e.Type == jobs.EventError
	}
	if !found {
		t.Fatalf("no error event: %+v", evs)
	}
	cl.failScale = nil
	if err := l.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if cl.count(a.ID) != 2 {
		t.Fatalf("after recovery workers = %d, want 2", cl.count(a.ID))
	}
}

func TestOnlyOnePlannerHoldsTheLease(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	a := NewLease(r.Client, r.Prefix, "a", time.Minute)
	b := NewLease(r.Client, r.Prefix, "b", time.Minute)
	fa, err := a.TryAcquire(ctx)
	if err != nil || fa == 0 {
		t.Fatalf("a acquire = %d, %v", fa, err)
	}
	if fb, _ := b.TryAcquire(ctx); fb != 0 {
		t.Fatalf("b acquired a held lease (fence %d)", fb)
	}
	if f, _ := a.TryAcquire(ctx); f != fa {
		t.Fatalf("renewal changed fence %d -> %d", fa, f)
	}
	// a stops renewing: the lease lapses (what its TTL would do, without
	// waiting for it).
	if err := r.Client.Del(ctx, r.Prefix+"planner:lease").Err(); err != nil {
		t.Fatal(err)
	}
	fb, _ := b.TryAcquire(ctx)
	if fb <= fa {
		t.Fatalf("takeover fence = %d, want > %d", fb, fa)
	}
	if f, _ := a.TryAcquire(ctx); f != 0 {
		t.Fatalf("deposed a still holds the lease")
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if f, _ := a.TryAcquire(ctx); f == 0 {
		t.Fatalf("a could not take a released lease")
	}
}

func TestFinishedJobCallsItsCallbackWithRetries(t *testing.T) {
	var mu sync.Mutex
	var got []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // first try fails: retried
			return
		}
		var j jobs.Job
		json.NewDecoder(r.Body).Decode(&j)
		got = append(got, j.ID+"="+string(j.State))
	}))
	defer srv.Close()
	cl := newFakeCluster(4)
	l, store := newTestLoop(t, cl)
	l.callbacks = NewCallbacks(CallbackConfig{Allow: loopback, Backoff: 10 * time.Millisecond}, nil)
	ctx := context.Background()
	spec := exampleSpec(t, 1, 2)
	spec.CallbackURL = srv.URL + "/done"
	a, _, err := store.Create(ctx, "t1", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	l.Round(ctx)
	store.Transition(ctx, a.ID, jobs.Running, "")
	store.Transition(ctx, a.ID, jobs.Succeeded, "")
	l.Round(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != a.ID+"=succeeded" || calls != 2 {
		t.Fatalf("callbacks = %v after %d calls; want [%s=succeeded] on the 2nd try", got, calls, a.ID)
	}
}
