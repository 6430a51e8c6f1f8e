package core

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/coord"
)

// joinRig is a job's coordination state in a real Redis with members a, b
// and c registered (heartbeats live) and generation 2, a join of c beside
// a and b, current; it returns the Redis, c's client and membership, and
// a client maker for the others.
func joinRig(t *testing.T) (*testenv.Redis, *coord.Client, *Membership, *coord.Generation) {
	t.Helper()
	r := testenv.NewRedis(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	var c *coord.Client
	for _, id := range []string{"a", "b", "c"} {
		cl, err := coord.New(r.Client, coord.Config{Prefix: r.Prefix, Job: "job", Worker: id, Lease: 10 * time.Second, Heartbeat: time.Second}, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.SetMember(ctx, coord.Member{Addr: id + ":1", State: coord.Ready}); err != nil {
			t.Fatal(err)
		}
		c = cl
	}
	g := &coord.Generation{Number: 2, Members: []string{"a", "b", "c"}, Addrs: []string{"a:1", "b:1", "c:1"},
		Root: 0, Joiners: []string{"c"}, LastApplied: -1, Reason: "join"}
	raw, _ := json.Marshal(g)
	k := c.Keys()
	if err := r.Client.Set(ctx, k.Gen(), raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.Set(ctx, k.GenNum(), g.Number, 0).Err(); err != nil {
		t.Fatal(err)
	}
	return r, c, &Membership{Self: "c", Log: log, Co: c, Now: time.Now}, g
}

// watchJoin runs CancelWhenOver for g and returns the join's context.
func watchJoin(t *testing.T, m *Membership, g *coord.Generation) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.CancelWhenOver(ctx, cancel, g)
	return ctx
}

// waitCancelled fails the test unless ctx ends within a generous bound
// (the watcher polls every 200 ms; nothing else ends it).
func waitCancelled(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the join of generation 2 was not cancelled after %s", what)
	}
}

// TestJoinEndsWhenAMemberLapses: a newcomer admitted beside members that
// died at that moment (their heartbeats lapse a few milliseconds later)
// stops waiting for them. Before, it waited JoinTimeout for the hand-over
// ring, then again for the main ring: nothing else ends a join that no
// newer generation replaces, and its leader, the newcomer itself, formed
// none while its members had filed no report.
func TestJoinEndsWhenAMemberLapses(t *testing.T) {
	r, c, m, g := joinRig(t)
	ctx := watchJoin(t, m, g)
	// Five polls with everyone alive: the join goes on.
	select {
	case <-ctx.Done():
		t.Fatal("the join was cancelled while every member was alive")
	case <-time.After(time.Second):
	}
	for _, id := range []string{"a", "b"} {
		if err := r.Client.Del(context.Background(), c.Keys().Heartbeat(id)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitCancelled(t, ctx, "a's and b's heartbeats lapsed")
}

// TestJoinEndsOnAPeersReport: a member that found the generation broken
// (its own ring or join failed) reported it; the others stop waiting too
// and report in the leader's window instead of being dropped as silent.
func TestJoinEndsOnAPeersReport(t *testing.T) {
	r, _, m, g := joinRig(t)
	ctx := watchJoin(t, m, g)
	b, err := coord.New(r.Client, coord.Config{Prefix: r.Prefix, Job: "job", Worker: "b", Lease: 10 * time.Second, Heartbeat: time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Report(context.Background(), g.Number, 5); err != nil {
		t.Fatal(err)
	}
	waitCancelled(t, ctx, "b reported it broken")
}
