package coord

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// pair registers workers a and b of one job on a real Redis and returns
// their clients; a leads (its leader is returned, not running).
// clock is the leader's time; tests move it instead of sleeping.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

func pair(t *testing.T, onFormed func(*Generation, []Loss)) (a, b *Client, l *Leader, clk *clock) {
	t.Helper()
	r := testenv.NewRedis(t)
	ctx := context.Background()
	mk := func(id string) *Client {
		c, err := New(r.Client, Config{Prefix: r.Prefix, Job: "job", Worker: id, Lease: 10 * time.Second, Heartbeat: time.Second}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetMember(ctx, Member{Addr: id + ":1", State: Ready, Since: time.Unix(int64(id[0]), 0)}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b = mk("a"), mk("b")
	clk = &clock{t: time.Unix(1000, 0)}
	l = NewLeader(a, LeaderOptions{MinStart: 2, Window: 100 * time.Millisecond, OnFormed: onFormed}, clk.now)
	return a, b, l, clk
}

// tick runs one leader round and returns the current generation.
func tick(t *testing.T, l *Leader) *Generation {
	t.Helper()
	if _, err := l.tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	g, err := l.c.ReadGen(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestReportOfOldGenerationRefused: the report script checks the
// generation in the same step as it writes, so a report about a generation
// that was replaced (setgen already cleared the reports) is dropped instead
// of making the next decision eject healthy members.
func TestReportOfOldGenerationRefused(t *testing.T) {
	ctx := context.Background()
	a, b, l, clk := pair(t, nil)
	if err := a.Report(ctx, 1, 3); !errors.Is(err, ErrStaleReport) {
		t.Fatalf("report before any generation: %v, want ErrStaleReport", err)
	}
	g1 := tick(t, l)
	if g1 == nil || g1.Number != 1 || !slices.Equal(g1.Members, []string{"a", "b"}) {
		t.Fatalf("first generation %+v, want 1 of [a b]", g1)
	}
	if err := b.Report(ctx, 1, 7); err != nil {
		t.Fatal(err)
	}
	reps, err := a.Reports(ctx)
	if err != nil || reps["b"] != (Report{Worker: "b", Gen: 1, Applied: 7}) {
		t.Fatalf("reports %v (%v), want b's of generation 1", reps, err)
	}
	// The leader forms generation 2 from b's report (a never reports and
	// its window lapses), then a's late report of generation 1 arrives.
	if g := tick(t, l); g.Number != 1 {
		t.Fatalf("generation %d formed inside the report window", g.Number)
	}
	clk.add(150 * time.Millisecond)
	g2 := tick(t, l)
	if g2 == nil || g2.Number != 2 {
		t.Fatalf("generation after the report: %+v, want 2", g2)
	}
	if err := a.Report(ctx, 1, 9); !errors.Is(err, ErrStaleReport) {
		t.Fatalf("late report of generation 1: %v, want ErrStaleReport", err)
	}
	if reps, err := a.Reports(ctx); err != nil || len(reps) != 0 {
		t.Fatalf("reports after the late one: %v (%v), want none", reps, err)
	}
	if err := a.Report(ctx, 2, 9); err != nil {
		t.Fatalf("report of the current generation: %v", err)
	}
}

// TestLeaderIgnoresStaleReport: a stale report that is in the hash anyway
// (written by an older worker without the script) changes nothing.
func TestLeaderIgnoresStaleReport(t *testing.T) {
	ctx := context.Background()
	a, _, l, clk := pair(t, nil)
	g1 := tick(t, l)
	if err := a.rdb.HSet(ctx, a.keys.Reports(), "a", "0|5").Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if g := tick(t, l); g.Number != g1.Number {
			t.Fatalf("a stale report formed generation %+v", g)
		}
		clk.add(time.Second)
	}
}

// TestLeaderRecordsLostMembers: a generation formed without a member whose
// heartbeat lapsed names it, with the cause, to OnFormed (a
// worker's death was once no job event).
func TestLeaderRecordsLostMembers(t *testing.T) {
	ctx := context.Background()
	type formed struct {
		gen  int64
		lost []Loss
	}
	var got []formed
	a, b, l, _ := pair(t, func(g *Generation, lost []Loss) { got = append(got, formed{g.Number, lost}) })
	tick(t, l)
	// b dies: its heartbeat lapses (deleted here), its record stays.
	if err := a.rdb.Del(ctx, b.keys.Heartbeat("b")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Report(ctx, 1, 4); err != nil {
		t.Fatal(err)
	}
	g2 := tick(t, l)
	if g2.Number != 2 || !slices.Equal(g2.Members, []string{"a"}) {
		t.Fatalf("generation after b died: %+v, want 2 of [a]", g2)
	}
	want := []formed{{1, nil}, {2, []Loss{{Worker: "b", Cause: LostHeartbeat}}}}
	if len(got) != len(want) {
		t.Fatalf("OnFormed calls %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].gen != want[i].gen || !slices.Equal(got[i].lost, want[i].lost) {
			t.Fatalf("OnFormed calls %+v, want %+v", got, want)
		}
	}
}

// TestLapsedNamesADeadMemberOfAJoin: the leader admits a newcomer beside
// members whose heartbeats are still there but about to lapse (they died
// at the moment the old leader's lease did). Once they have lapsed, Lapsed
// names the first of them to the newcomer, so its join stops waiting for
// them; it names nobody while all are alive, and never the asker itself.
// It leaves the generation's member order as it was.
func TestLapsedNamesADeadMemberOfAJoin(t *testing.T) {
	ctx := context.Background()
	a, b, l, _ := pair(t, nil)
	tick(t, l)
	c, err := New(a.rdb, Config{Prefix: a.cfg.Prefix, Job: "job", Worker: "c", Lease: 10 * time.Second, Heartbeat: time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetMember(ctx, Member{Addr: "c:1", State: Ready, Since: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	g2 := tick(t, l)
	if g2.Number != 2 || g2.Reason != "join" || !slices.Equal(g2.Members, []string{"a", "b", "c"}) {
		t.Fatalf("generation %+v, want 2, a join of [a b c]", g2)
	}
	if id, err := c.Lapsed(ctx, g2, "c"); err != nil || id != "" {
		t.Fatalf("Lapsed with all alive: %q (%v), want none", id, err)
	}
	g2.Members = []string{"c", "b", "a"} // rank order that sorting would change
	for _, w := range []*Client{b, a} {
		if err := a.rdb.Del(ctx, a.keys.Heartbeat(w.cfg.Worker)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := c.Lapsed(ctx, g2, "c"); err != nil || id != "b" {
		t.Fatalf("Lapsed after a and b died: %q (%v), want b (the first in rank order)", id, err)
	}
	if !slices.Equal(g2.Members, []string{"c", "b", "a"}) {
		t.Fatalf("Lapsed reordered the members: %v", g2.Members)
	}
	if err := a.rdb.Del(ctx, a.keys.Heartbeat("c")).Err(); err != nil {
		t.Fatal(err)
	}
	if id, err := c.Lapsed(ctx, &Generation{Number: 2, Members: []string{"c"}}, "c"); err != nil || id != "" {
		t.Fatalf("Lapsed of a generation of the asker alone: %q (%v), want none", id, err)
	}
}
