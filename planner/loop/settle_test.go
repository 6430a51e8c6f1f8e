package loop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// fakeDone is the workers' done marker, per job.
type fakeDone struct {
	mu sync.Mutex
	st map[string]jobs.State
}

func (f *fakeDone) JobDone(ctx context.Context, id string) (jobs.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st[id], nil
}

func (f *fakeDone) set(id string, st jobs.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil {
		f.st = map[string]jobs.State{}
	}
	f.st[id] = st
}

// receiver counts callbacks by job id.
type receiver struct {
	mu  sync.Mutex
	got map[string]int
	srv *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got[req.Header.Get(HeaderJob)]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[id]
}

func (r *receiver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.got {
		n += c
	}
	return n
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The defect: a one-epoch job's workers all exited 0, but the job's own
// "succeeded" write had been refused (starting -> succeeded), so it stayed
// starting forever, was never torn down and no callback fired.
func TestJobWhoseWorkersAllExitedIsSettled(t *testing.T) {
	for _, tc := range []struct {
		name       string
		done       jobs.State
		codes      []int
		running    bool
		want       jobs.State
		wantReason string
	}{
		{"exited 0 after the end, still starting", jobs.Succeeded, []int{0, 0}, false, jobs.Succeeded, "training finished; all 2 workers exited (exit codes 0, 0)"},
		{"exited 0 after the end, running", jobs.Succeeded, []int{0, 0}, true, jobs.Succeeded, "training finished"},
		{"crashed before the end", "", []int{1, 137}, true, jobs.Failed, "all 2 workers exited before the job finished (exit codes 1, 137)"},
		{"exited 0 before the end", "", []int{0, 0}, false, jobs.Failed, "exit codes 0, 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			done := &fakeDone{}
			rcv := newReceiver(t)
			cl := newFakeCluster(4)
			l, store := newTestLoop(t, cl, func(c *Config) {
				c.Now = func() time.Time { return now }
				c.Done = done
				c.Callbacks = NewCallbacks(CallbackConfig{Allow: loopback, Backoff: time.Millisecond}, nil)
			})
			ctx := context.Background()
			spec := exampleSpec(t, 2, 2)
			spec.CallbackURL = rcv.srv.URL
			j, _, _ := store.Create(ctx, "t1", spec, "")
			if err := l.Round(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.running {
				store.Transition(ctx, j.ID, jobs.Running, "training")
			}
			done.set(j.ID, tc.done)
			cl.exit(j.ID, tc.codes...)
			now = now.Add(time.Second)
			l.Round(ctx)
			if got, _ := store.Get(ctx, j.ID); got.State.Terminal() {
				t.Fatalf("settled at once (%s); want a grace of SettleAfter", got.State)
			}
			now = now.Add(l.cfg.SettleAfter)
			if err := l.Round(ctx); err != nil {
				t.Fatal(err)
			}
			got, _ := store.Get(ctx, j.ID)
			if got.State != tc.want || !strings.Contains(got.Reason, tc.wantReason) {
				t.Fatalf("job = %s %q, want %s with %q", got.State, got.Reason, tc.want, tc.wantReason)
			}
			l.Round(ctx) // the finished queue: teardown and callback
			waitFor(t, "the callback", func() bool { return rcv.count(j.ID) == 1 })
			if n := cl.teardownsOf(j.ID); n != 1 {
				t.Fatalf("teardowns = %d, want 1", n)
			}
			waitFor(t, "the callback recorded", func() bool {
				g, _ := store.Get(ctx, j.ID)
				return g.Planner != nil && g.Planner.Finished
			})
			for range 3 {
				now = now.Add(time.Second)
				l.Round(ctx)
			}
			if n, c := cl.teardownsOf(j.ID), rcv.count(j.ID); n != 1 || c != 1 {
				t.Fatalf("after more rounds: teardowns %d, callbacks %d; want 1 and 1", n, c)
			}
		})
	}
}
