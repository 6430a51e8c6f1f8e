package loop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/planner"
)

// fakeSpeeds serves step times set by the test, per job, as fresh figures
// of generation 1 (published a second before now()).
type fakeSpeeds struct {
	mu  sync.Mutex
	ms  map[string]map[string]float64
	now func() time.Time
}

func (f *fakeSpeeds) StepTimes(ctx context.Context, jobID string) (map[string]planner.WorkerSpeed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]planner.WorkerSpeed{}
	for k, v := range f.ms[jobID] {
		out[k] = planner.WorkerSpeed{ID: k, Published: true, StepMillis: v, Generation: 1, WorldSize: len(f.ms[jobID]), At: f.now().Add(-time.Second)}
	}
	return out, nil
}

func (f *fakeSpeeds) set(jobID string, ms map[string]float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ms == nil {
		f.ms = map[string]map[string]float64{}
	}
	f.ms[jobID] = ms
}

// stragglerEnv is a loop with fake speeds and a clock the test moves, and
// one running job of n workers.
type stragglerEnv struct {
	t     *testing.T
	l     *Loop
	store *jobstore.Store
	cl    *fakeCluster
	sp    *fakeSpeeds
	now   time.Time
	job   string
}

func newStragglerEnv(t *testing.T, workers int) *stragglerEnv {
	t.Helper()
	e := &stragglerEnv{t: t, cl: newFakeCluster(8), sp: &fakeSpeeds{}, now: t0}
	r := testenv.NewRedis(t)
	e.store = jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	cfg := DefaultConfig()
	cfg.Prefix, cfg.Holder = r.Prefix, t.Name()
	cfg.Now = func() time.Time { return e.now }
	cfg.Speeds = e.sp
	e.sp.now = func() time.Time { return e.now }
	l, err := New(cfg, e.store, e.cl, r.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	ctx := context.Background()
	j, _, err := e.store.Create(ctx, "t1", exampleSpec(t, workers, workers), "")
	if err != nil {
		t.Fatal(err)
	}
	e.job = j.ID
	e.round()
	if _, err := e.store.Transition(ctx, j.ID, jobs.Running, "training"); err != nil {
		t.Fatal(err)
	}
	if got := e.cl.count(j.ID); got != workers {
		t.Fatalf("job got %d workers, want %d", got, workers)
	}
	return e
}

func (e *stragglerEnv) round() {
	e.t.Helper()
	e.now = e.now.Add(2 * time.Second)
	if err := e.l.Round(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// w is the current ID of the worker at index i.
func (e *stragglerEnv) w(i int) string {
	e.cl.mu.Lock()
	defer e.cl.mu.Unlock()
	return e.cl.workerIDLocked(e.job, i)
}

// speeds sets step times by worker index.
func (e *stragglerEnv) speeds(ms ...float64) {
	m := map[string]float64{}
	for i, v := range ms {
		m[e.w(i)] = v
	}
	e.sp.set(e.job, m)
}

func TestStragglerReplacedAfterConsecutiveRounds(t *testing.T) {
	e := newStragglerEnv(t, 3)
	slow := e.w(2)
	e.speeds(100, 110, 300)
	e.round()
	e.round()
	// A fast round in between starts the count again.
	e.speeds(100, 110, 120)
	e.round()
	e.speeds(100, 110, 300)
	e.round()
	e.round()
	if s := e.cl.stopped(); len(s) != 0 {
		t.Fatalf("replaced after 2 consecutive slow rounds: %v", s)
	}
	e.round()
	if s := e.cl.stopped(); len(s) != 1 || s[0] != e.job+"/"+slow {
		t.Fatalf("stops = %v, want [%s/%s] after 3 slow rounds", s, e.job, slow)
	}
	evs, _ := e.store.Events(context.Background(), e.job, "", 100)
	want := fmt.Sprintf("straggler: worker %s at 2.7x the median step time (300 ms vs 110 ms, generation 1, 3 workers); replaced", slow)
	found := false
	for _, ev := range evs {
		found = found || ev.Message == want
	}
	if !found {
		t.Fatalf("no event %q in %+v", want, evs)
	}
}

func TestStragglerNotReplaced(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		speeds  func(e *stragglerEnv) map[string]float64
	}{
		{"two workers", 2, func(e *stragglerEnv) map[string]float64 {
			return map[string]float64{e.w(0): 100, e.w(1): 400}
		}},
		{"unknown worker is slow", 3, func(e *stragglerEnv) map[string]float64 {
			return map[string]float64{e.w(0): 100, e.w(1): 100, e.w(2): 110, "ghost": 1000}
		}},
		{"too few measured", 3, func(e *stragglerEnv) map[string]float64 {
			return map[string]float64{e.w(0): 100, e.w(1): 400, "ghost": 100}
		}},
		{"within the factor", 4, func(e *stragglerEnv) map[string]float64 {
			return map[string]float64{e.w(0): 100, e.w(1): 100, e.w(2): 110, e.w(3): 150}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStragglerEnv(t, tc.workers)
			e.sp.set(e.job, tc.speeds(e))
			for range 6 {
				e.round()
			}
			if s := e.cl.stopped(); len(s) != 0 {
				t.Fatalf("stops = %v, want none", s)
			}
		})
	}
}

func TestStragglerCooldown(t *testing.T) {
	e := newStragglerEnv(t, 4)
	e.speeds(100, 100, 100, 400)
	for range 3 {
		e.round()
	}
	if n := len(e.cl.stopped()); n != 1 {
		t.Fatalf("stops = %v, want 1", e.cl.stopped())
	}
	// The replacement and another worker are slow too: neither goes
	// within the cooldown (2 min; a round is 2 s).
	e.speeds(100, 100, 500, 400)
	for range 50 {
		e.round()
	}
	if s := e.cl.stopped(); len(s) != 1 {
		t.Fatalf("replaced within the cooldown: %v", s)
	}
	for range 15 {
		e.round()
	}
	s := e.cl.stopped()
	if len(s) != 2 || !strings.HasSuffix(s[1], "/"+e.job+"-2") {
		t.Fatalf("stops after the cooldown = %v, want the slowest (%s-2) second", s, e.job)
	}
}

func TestStragglerStopFailureIsAnEvent(t *testing.T) {
	e := newStragglerEnv(t, 3)
	e.speeds(100, 100, 400)
	e.cl.failStop = fmt.Errorf("nomad: 500 boom")
	e.round()
	e.round()
	e.now = e.now.Add(2 * time.Second)
	if err := e.l.Round(context.Background()); err == nil || !strings.Contains(err.Error(), "straggler") {
		t.Fatalf("round with a failing stop = %v, want a straggler error", err)
	}
	evs, _ := e.store.Events(context.Background(), e.job, "", 100)
	found := false
	for _, ev := range evs {
		found = found || ev.Type == jobs.EventError && strings.Contains(ev.Message, "straggler")
	}
	if !found {
		t.Fatalf("no error event: %+v", evs)
	}
}
