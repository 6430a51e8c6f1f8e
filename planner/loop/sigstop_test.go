package loop

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/redis/go-redis/v9"
)

const helperEnv = "EDL_TEST_HELPER_PLANNER"

// printingCluster is the helper process's cluster: a fake whose every call
// is a line on stdout, and whose Capacity is slow, so that a round lasts
// long enough to be stopped in the middle.
type printingCluster struct{ *fakeCluster }

func (c printingCluster) Capacity(ctx context.Context) (jobs.Capacity, error) {
	fmt.Println("call capacity")
	time.Sleep(150 * time.Millisecond)
	return c.fakeCluster.Capacity(ctx)
}

func (c printingCluster) Scale(ctx context.Context, j jobs.Job, n int, reason string) error {
	fmt.Printf("call write scale %s=%d\n", j.ID, n)
	return c.fakeCluster.Scale(ctx, j, n, reason)
}

func (c printingCluster) Teardown(ctx context.Context, id string) error {
	fmt.Println("call write teardown " + id)
	return c.fakeCluster.Teardown(ctx, id)
}

func (c printingCluster) StopWorker(ctx context.Context, id, w, reason string) error {
	fmt.Println("call write stop " + id + "/" + w)
	return c.fakeCluster.StopWorker(ctx, id, w, reason)
}

// TestHelperPlannerProcess is the planner run in a child process by
// TestSIGSTOPpedPlannerWritesNothingAfterItWakes; on its own it does nothing.
func TestHelperPlannerProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		return
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("EDL_HELPER_REDIS")})
	prefix := os.Getenv("EDL_HELPER_PREFIX")
	store := jobstore.New(rdb, jobstore.Config{Prefix: prefix})
	cfg := DefaultConfig()
	cfg.Prefix, cfg.Holder = prefix, "child"
	cfg.Interval, cfg.LeaseTTL = 50*time.Millisecond, 600*time.Millisecond
	cfg.Callbacks = NewCallbacks(CallbackConfig{Allow: loopback, Backoff: time.Millisecond}, nil)
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l, err := New(cfg, store, printingCluster{newFakeCluster(8)}, rdb, log)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	_ = l.Run(ctx)
	os.Exit(0)
}

type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
}

func (l *lines) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...)
}

// A real SIGSTOP of the active planner, in its own process, while its
// rounds run: the stand-by takes over and finishes every job once; after
// SIGCONT the stopped one neither writes to the store nor acts on the
// cluster.
func TestSIGSTOPpedPlannerWritesNothingAfterItWakes(t *testing.T) {
	r := testenv.NewRedis(t)
	ps := &planners{store: jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix}),
		shared: newFakeCluster(8), log: &callLog{}, rcv: newReceiver(t)}
	ctx := context.Background()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPlannerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "EDL_HELPER_REDIS="+r.Addr, "EDL_HELPER_PREFIX="+r.Prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var got lines
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			got.add(sc.Text())
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-read
		_ = cmd.Wait()
	})
	waitFor(t, "the child holding the lease", func() bool {
		v, _ := r.Client.Get(ctx, r.Prefix+"planner:lease").Result()
		return v == "child"
	})
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
	waitFor(t, "every job started by the child", func() bool {
		for _, id := range ids {
			if j, _ := ps.store.Get(ctx, id); j.State != jobs.Starting {
				return false
			}
		}
		return true
	})
	// Stop it while a round is running (its Capacity takes 150 ms).
	n := len(got.snapshot())
	waitFor(t, "the child in a round", func() bool {
		s := got.snapshot()
		return len(s) > n && s[len(s)-1] == "call capacity"
	})
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		ps.store.Transition(ctx, id, jobs.Running, "training")
		ps.store.Transition(ctx, id, jobs.Succeeded, "training finished")
	}
	waitFor(t, "b takes over and finishes every job", func() bool {
		if b.Fence() == 0 || ps.rcv.total() != len(ids) {
			return false
		}
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
	mark := len(got.snapshot())
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the woken child standing by", func() bool {
		for _, s := range got.snapshot()[mark:] {
			if strings.Contains(s, "lease lost") {
				return true
			}
		}
		return false
	})
	for _, s := range got.snapshot()[mark:] {
		if strings.HasPrefix(s, "call write") {
			t.Fatalf("the woken planner acted on the cluster: %q", s)
		}
	}
	for _, id := range ids {
		j, _ := ps.store.Get(ctx, id)
		if j.Version != versions[id] {
			t.Fatalf("job %s written after the takeover (version %d -> %d)", id, versions[id], j.Version)
		}
		if n, c := ps.shared.teardownsOf(id), ps.rcv.count(id); n != 1 || c != 1 {
			t.Fatalf("job %s: %d teardowns, %d callbacks; want 1 and 1", id, n, c)
		}
	}
	if v, _ := r.Client.Get(ctx, r.Prefix+"planner:lease").Result(); v != "b" {
		t.Fatalf("lease held by %q after the child woke, want b", v)
	}
}
