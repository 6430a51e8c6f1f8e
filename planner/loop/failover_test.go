package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

// taggedCluster is one planner's view of a shared fake cluster; it logs
// every call with the planner's name.
type taggedCluster struct {
	*fakeCluster
	name string
	log  *callLog
}

type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
}

func (c *callLog) since(n int, prefix string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.calls[n:] {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func (c *callLog) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

func (c taggedCluster) Scale(ctx context.Context, j jobs.Job, n int, reason string) error {
	c.log.add(fmt.Sprintf("%s:scale %s=%d", c.name, j.ID, n))
	return c.fakeCluster.Scale(ctx, j, n, reason)
}

func (c taggedCluster) Teardown(ctx context.Context, id string) error {
	c.log.add(c.name + ":teardown " + id)
	return c.fakeCluster.Teardown(ctx, id)
}

func (c taggedCluster) StopWorker(ctx context.Context, id, w, reason string) error {
	c.log.add(c.name + ":stop " + id + "/" + w)
	return c.fakeCluster.StopWorker(ctx, id, w, reason)
}

// pauser freezes a loop the way SIGSTOP would: its round and its lease
// renewal block at the next hook until released.
type pauser struct {
	mu      sync.Mutex
	paused  bool
	release chan struct{}
	blocked chan string // a hook that blocked, once per block
}

func newPauser() *pauser {
	return &pauser{release: make(chan struct{}), blocked: make(chan string, 16)}
}

func (p *pauser) hook(point string) {
	p.mu.Lock()
	paused, rel := p.paused, p.release
	p.mu.Unlock()
	if !paused || (point != "capacity" && point != "renew") {
		return
	}
	select {
	case p.blocked <- point:
	default:
	}
	<-rel
}

func (p *pauser) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
}

func (p *pauser) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	close(p.release)
}

type planners struct {
	store  *jobstore.Store
	shared *fakeCluster
	log    *callLog
	rcv    *receiver
}

func (ps *planners) start(t *testing.T, r *testenv.Redis, name string, hook func(string)) (*Loop, context.CancelFunc, <-chan struct{}) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Prefix, cfg.Holder = r.Prefix, name
	cfg.Interval, cfg.LeaseTTL = 50*time.Millisecond, 600*time.Millisecond
	cfg.Callbacks = NewCallbacks(CallbackConfig{Allow: loopback, Backoff: time.Millisecond}, nil)
	l, err := New(cfg, ps.store, taggedCluster{ps.shared, name, ps.log}, r.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.testHook = hook
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l, cancel, done
}

// The active planner is paused mid-round (its renewals too, as SIGSTOP
// would); the stand-by takes over and finishes every job exactly once:
// one teardown and one callback each. When the paused one wakes it writes
// nothing, to the store or the cluster.
func TestTakeoverFinishesEveryJobOnceAndTheWokenPlannerWritesNothing(t *testing.T) {
	for _, mode := range []string{"pause", "kill"} {
		t.Run(mode, func(t *testing.T) {
			r := testenv.NewRedis(t)
			ps := &planners{store: jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix}),
				shared: newFakeCluster(8), log: &callLog{}, rcv: newReceiver(t)}
			ctx := context.Background()
			p := newPauser()
			a, killA, doneA := ps.start(t, r, "a", p.hook)
			waitFor(t, "a active", func() bool { return a.Fence() > 0 })
			b, _, _ := ps.start(t, r, "b", nil)
			var ids []string
			for i := range 3 {
				spec := exampleSpec(t, 1, 2)
				spec.CallbackURL = ps.rcv.srv.URL
				spec.Name = fmt.Sprintf("j%d", i)
				j, _, err := ps.store.Create(ctx, "t1", spec, "")
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			waitFor(t, "every job started by a", func() bool {
				for _, id := range ids {
					if j, _ := ps.store.Get(ctx, id); j.State != jobs.Starting || ps.shared.count(id) == 0 {
						return false
					}
				}
				return true
			})
			if b.Fence() != 0 {
				t.Fatal("both planners active")
			}
			switch mode {
			case "pause":
				p.pause()
				<-p.blocked
			case "kill":
				killA()
				<-doneA
			}
			// The jobs end while a is frozen (or gone): their workers say so.
			for _, id := range ids {
				ps.store.Transition(ctx, id, jobs.Running, "training")
				ps.store.Transition(ctx, id, jobs.Succeeded, "training finished")
			}
			waitFor(t, "b takes over and sends every callback", func() bool { return b.Fence() > 0 && ps.rcv.total() == len(ids) })
			waitFor(t, "b records every job finished", func() bool {
				for _, id := range ids {
					if j, _ := ps.store.Get(ctx, id); j.Planner == nil || !j.Planner.Finished {
						return false
					}
				}
				return true
			})
			versions := map[string]int64{}
			for _, id := range ids {
				j, _ := ps.store.Get(ctx, id)
				versions[id] = j.Version
			}
			mark := ps.log.len()
			if mode == "pause" {
				p.resume()
				waitFor(t, "a standing by", func() bool { return a.Fence() == 0 })
				// Let a try a few more times; it must stay a stand-by.
				for n := b.Rounds() + 5; b.Rounds() < n; {
					time.Sleep(10 * time.Millisecond)
				}
				if a.Fence() != 0 {
					t.Fatal("woken planner took the lease back")
				}
			}
			if calls := ps.log.since(mark, "a:"); len(calls) > 0 {
				t.Fatalf("woken planner called the cluster: %v", calls)
			}
			for _, id := range ids {
				j, _ := ps.store.Get(ctx, id)
				if j.Version != versions[id] {
					t.Fatalf("job %s written after b finished it (version %d -> %d)", id, versions[id], j.Version)
				}
				if n, c := ps.shared.teardownsOf(id), ps.rcv.count(id); n != 1 || c != 1 {
					t.Fatalf("job %s: %d teardowns, %d callbacks; want 1 and 1", id, n, c)
				}
			}
		})
	}
}

// A planner that lost the lease without noticing (its local clock check
// fooled) has every store write refused by the fence.
func TestDeposedPlannersWritesAreFenced(t *testing.T) {
	cl := newFakeCluster(4)
	l, store := newTestLoop(t, cl)
	ctx := context.Background()
	a, _, _ := store.Create(ctx, "t1", exampleSpec(t, 1, 2), "")
	if err := l.Round(ctx); err != nil {
		t.Fatal(err)
	}
	w, _ := l.writer(ctx)
	// Another planner takes over.
	other := NewLease(l.lease.rdb, l.cfg.Prefix, "other", time.Minute)
	l.lease.rdb.Del(ctx, l.cfg.Prefix+"planner:lease")
	if f, _ := other.TryAcquire(ctx); f <= l.Fence() {
		t.Fatalf("takeover fence %d, want > %d", f, l.Fence())
	}
	before, _ := store.Get(ctx, a.ID)
	_, err := w.Transition(ctx, a.ID, jobs.Suspended, "late")
	if !errors.Is(err, jobs.ErrFenced) {
		t.Fatalf("deposed write = %v, want ErrFenced", err)
	}
	if _, err := w.AppendEvent(ctx, a.ID, jobs.Event{Type: jobs.EventScale, Message: "late"}); !errors.Is(err, jobs.ErrFenced) {
		t.Fatalf("deposed event = %v, want ErrFenced", err)
	}
	if err := l.Round(ctx); err == nil {
		t.Fatal("round without the lease succeeded")
	}
	after, _ := store.Get(ctx, a.ID)
	if after.Version != before.Version {
		t.Fatalf("job written by the deposed planner: version %d -> %d", before.Version, after.Version)
	}
}

var _ Cluster = taggedCluster{}

// A planner that stops hands the lease over at once: the stand-by does not
// wait for the TTL.
func TestStoppedPlannerReleasesTheLease(t *testing.T) {
	r := testenv.NewRedis(t)
	ps := &planners{store: jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix}),
		shared: newFakeCluster(8), log: &callLog{}, rcv: newReceiver(t)}
	a, stopA, doneA := ps.start(t, r, "a", nil)
	waitFor(t, "a active", func() bool { return a.Fence() > 0 })
	stopA()
	<-doneA
	if n, _ := r.Client.Exists(context.Background(), r.Prefix+"planner:lease").Result(); n != 0 {
		t.Fatal("a stopped planner kept the lease")
	}
}
