package live

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// Rank 0's program SIGKILLed, first the moment a generation forms (the
// others are at its setup), then mid-training in a world of 3: the
// survivors' store clients used to be connected to rank 0's TCPStore, and
// torch 1.13 aborted a survivor whose client saw that store reset
// ("terminate called ... Connection reset by peer"); its worker then
// restarted it without state. With the store behind each program's own
// worker (livestore.go) only the killed programs restart: every survivor's
// program runs from start to end in one process.
func TestLiveRootKilledSurvivorsKeepRunning(t *testing.T) {
	t.Parallel()
	slow := slowFile(t) // slow steps while the kills come, full speed after
	l := startLive(t, 2, 3, 9000, 8, "--batch", "24", "--hidden", "32", "--step-sleep", "0.03", "--step-sleep-while", slow)
	l.setMaxRestarts(3)
	l.add("w0")
	l.add("w1")
	p := l.waitProgress("steps at world 2", 2*time.Minute, func(p jobs.Progress) bool { return p.Step >= 10 && p.WorldSize == 2 })
	co, err := coord.New(l.r.Client, coord.Config{Prefix: l.r.Prefix, Job: "j1", Worker: "test", Lease: time.Second, Heartbeat: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	killed := map[string]bool{}
	kill := func(id string, why string) {
		t.Helper()
		pid := l.mustProgramPid(id)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed[id] = true
		t.Logf("killed %s's program (%s)", id, why)
	}
	// 1: at the setup of the generation admitting w2.
	l.add("w2")
	var g *coord.Generation
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		if g, err = co.ReadGen(ctx); err == nil && g != nil && g.Number > p.Generation {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no generation admitting w2")
		}
	}
	kill(g.Members[0], "rank 0 of the forming generation")
	q := l.waitProgress("a world of 3 after the kill", 2*time.Minute, func(q jobs.Progress) bool { return q.Generation > g.Number && q.WorldSize == 3 })
	q = l.waitProgress("steps at world 3", time.Minute, func(x jobs.Progress) bool { return x.Step >= q.Step+10 })
	// 2: mid-training, rank 0 of the running generation.
	g, err = co.ReadGen(ctx)
	if err != nil || g == nil {
		t.Fatalf("generation: %v", err)
	}
	kill(g.Members[0], "rank 0 mid-training")
	q = l.waitProgress("a world of 3 after the second kill", 2*time.Minute, func(x jobs.Progress) bool { return x.Generation > g.Number && x.WorldSize == 3 })
	l.waitProgress("steps after the second kill", time.Minute, func(x jobs.Progress) bool { return x.Step >= q.Step+5 })
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	l.wait(3*time.Minute, 1)
	l.jobs.Mu.Lock()
	events := append([]jobs.Event(nil), l.jobs.Events...)
	l.jobs.Mu.Unlock()
	failed := regexp.MustCompile(`program of worker (w\d) failed`)
	for _, e := range events {
		if m := failed.FindStringSubmatch(e.Message); m != nil && !killed[m[1]] {
			t.Errorf("survivor %s's program was restarted: %s", m[1], e.Message)
		}
	}
	for _, id := range []string{"w0", "w1", "w2"} {
		if killed[id] {
			continue
		}
		if n := strings.Count(l.logs[id].String(), "DONE "); n != 1 {
			t.Errorf("survivor %s's program printed DONE %d times, want once (it never restarted)", id, n)
		}
	}
}

// The store's ops on a real Redis: c10d's semantics (get waits, add
// counts, compare_set as TCPStore answers), one namespace per generation
// that expires, bounded waits that end early when superseded, bad
// requests named.
func TestLiveStoreOps(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	latest := int64(0)
	s := &liveStore{rdb: r.Client, base: r.Prefix + "j1:", def: 300 * time.Millisecond, max: time.Second,
		gone: func(gen int64) (bool, error) { return latest > gen, nil }}
	do := func(op string, gen int64, req liveStoreRequest) liveStoreReply {
		t.Helper()
		rep, err := s.do(ctx, op, gen, req)
		if err != nil {
			t.Fatalf("%s %+v: %v", op, req, err)
		}
		return rep
	}
	blob := []byte{0, 1, 2, 255, '\n'}
	do("store_set", 3, liveStoreRequest{Key: "addr", Value: blob})
	if got := do("store_get", 3, liveStoreRequest{Key: "addr"}).Value; !bytes.Equal(got, blob) {
		t.Errorf("get = %v, want %v", got, blob)
	}
	for i, c := range []struct {
		amount, want int64
	}{{2, 2}, {0, 2}, {-1, 1}} {
		if got := do("store_add", 3, liveStoreRequest{Key: "n", Amount: c.amount}).Num; got != c.want {
			t.Errorf("add #%d (%d) = %d, want %d", i, c.amount, got, c.want)
		}
	}
	for _, c := range []struct {
		key, expected, desired, want string
	}{
		{"c", "", "a", "a"},     // absent, expected empty: set
		{"c", "x", "b", "a"},    // differs: the current value
		{"c", "a", "b", "b"},    // equal: swapped
		{"gone", "x", "y", "x"}, // absent, expected set: expected (TCPStore's answer)
	} {
		if got := string(do("store_cas", 3, liveStoreRequest{Key: c.key, Expected: []byte(c.expected), Value: []byte(c.desired)}).Value); got != c.want {
			t.Errorf("compare_set(%s, %q, %q) = %q, want %q", c.key, c.expected, c.desired, got, c.want)
		}
	}
	if !do("store_check", 3, liveStoreRequest{Keys: []string{"addr", "n"}}).Exists || do("store_check", 3, liveStoreRequest{Keys: []string{"addr", "no"}}).Exists {
		t.Error("check: wrong answer")
	}
	if n := do("store_num_keys", 3, liveStoreRequest{}).Num; n != 3 {
		t.Errorf("num_keys = %d, want 3", n)
	}
	if !do("store_delete", 3, liveStoreRequest{Key: "c"}).Exists || do("store_delete", 3, liveStoreRequest{Key: "c"}).Exists {
		t.Error("delete: wrong answer")
	}
	if do("store_check", 4, liveStoreRequest{Keys: []string{"addr"}}).Exists {
		t.Error("generation 4 sees generation 3's key")
	}
	if ttl := r.Client.PTTL(ctx, s.key(3)).Val(); ttl <= 0 || ttl > liveStoreTTL {
		t.Errorf("generation 3's hash expires in %s, want (0, %s]", ttl, liveStoreTTL)
	}

	// A wait returns as soon as its keys exist.
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = r.Client.HSet(ctx, s.key(5), "late", "1").Err()
	}()
	start := time.Now()
	do("store_wait", 5, liveStoreRequest{Keys: []string{"late"}, TimeoutMs: 5000})
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Errorf("wait took %s for a key set after 50ms", d)
	}
	// Bounded: its own timeout, the default, the maximum.
	for _, c := range []struct {
		timeoutMs int64
		atLeast   time.Duration
		atMost    time.Duration
	}{{100, 100 * time.Millisecond, 600 * time.Millisecond}, {0, 300 * time.Millisecond, 900 * time.Millisecond}, {60000, time.Second, 2 * time.Second}} {
		start := time.Now()
		_, err := s.do(ctx, "store_get", 5, liveStoreRequest{Key: "never", TimeoutMs: c.timeoutMs})
		d := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "Timeout") || d < c.atLeast || d > c.atMost {
			t.Errorf("get of a missing key, timeout_ms %d: %v after %s, want a timeout in [%s, %s]", c.timeoutMs, err, d, c.atLeast, c.atMost)
		}
	}
	// Superseded: ends at once, saying so.
	latest = 6
	start = time.Now()
	rep, err := s.do(ctx, "store_wait", 5, liveStoreRequest{Keys: []string{"never"}, TimeoutMs: 60000})
	if !errors.Is(err, errLiveStoreSuperseded) || !rep.Superseded || time.Since(start) > 500*time.Millisecond {
		t.Errorf("wait in a replaced generation: %+v, %v after %s; want superseded at once", rep, err, time.Since(start))
	}

	for _, c := range []struct {
		op   string
		gen  int64
		req  liveStoreRequest
		want string
	}{
		{"store_set", 0, liveStoreRequest{Key: "k"}, "gen 0"},
		{"store_set", 1, liveStoreRequest{}, "key missing"},
		{"store_wait", 1, liveStoreRequest{}, "keys missing"},
		{"store_check", 1, liveStoreRequest{}, "keys missing"},
		{"store_wait", 1, liveStoreRequest{Keys: []string{"k"}, TimeoutMs: -1}, "timeout_ms -1"},
		{"store_nope", 1, liveStoreRequest{}, `unknown op "store_nope"`},
	} {
		if _, err := s.do(ctx, c.op, c.gen, c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s gen %d %+v: %v, want an error naming %q", c.op, c.gen, c.req, err, c.want)
		}
	}
}
