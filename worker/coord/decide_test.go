package coord

import (
	"slices"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := func(state MemberState, ids ...string) map[string]Member {
		out := map[string]Member{}
		for i, id := range ids {
			out[id] = Member{ID: id, Addr: id + ":1", State: state, Since: t0.Add(time.Duration(i) * time.Second)}
		}
		return out
	}
	merge := func(a, b map[string]Member) map[string]Member {
		for k, v := range b {
			a[k] = v
		}
		return a
	}
	alive := func(ids ...string) map[string]bool {
		out := map[string]bool{}
		for _, id := range ids {
			out[id] = true
		}
		return out
	}
	g3 := &Generation{Number: 4, Members: []string{"a", "b", "c"}, Root: 0}
	tests := []struct {
		name     string
		snap     Snapshot
		now      time.Time
		members  []string // nil: no generation
		root     int
		sync     bool
		applied  int64
		restore  bool
		joiners  []string
		lost     []Loss
		wantWait bool
	}{
		{name: "first waits for min", snap: Snapshot{Members: m(Ready, "a"), Alive: alive("a"), MinStart: 2}},
		{name: "first forms", snap: Snapshot{Members: m(Ready, "a", "b"), Alive: alive("a", "b"), MinStart: 2},
			members: []string{"a", "b"}, root: -1, applied: -1},
		{name: "steady", snap: Snapshot{Gen: g3, Members: m(Active, "a", "b", "c"), Alive: alive("a", "b", "c")}},
		{name: "join", snap: Snapshot{Gen: g3, Members: merge(m(Active, "a", "b", "c"), m(Ready, "d")), Alive: alive("a", "b", "c", "d")},
			members: []string{"a", "b", "c", "d"}, root: 0, applied: -1, joiners: []string{"d"}},
		{name: "dead newcomer ignored", snap: Snapshot{Gen: g3, Members: merge(m(Active, "a", "b", "c"), m(Ready, "d")), Alive: alive("a", "b", "c")}},
		{name: "graceful leave", snap: Snapshot{Gen: g3, Members: m(Active, "a", "c"), Alive: alive("a", "c")},
			members: []string{"a", "c"}, root: 0, applied: -1},
		{name: "failure waits for pending reporter",
			snap: Snapshot{Gen: g3, Members: m(Active, "a", "b", "c"), Alive: alive("a", "b", "c"), FirstReport: t0,
				Reports: map[string]Report{"a": {Worker: "a", Gen: 4, Applied: 9}}},
			now: t0.Add(100 * time.Millisecond), wantWait: true},
		{name: "failure root is the most advanced survivor",
			snap: Snapshot{Gen: g3, Members: m(Active, "a", "b", "c"), Alive: alive("a", "b", "c"), FirstReport: t0,
				Reports: map[string]Report{"a": {Worker: "a", Gen: 4, Applied: 9}, "c": {Worker: "c", Gen: 4, Applied: 10}}},
			now: t0.Add(time.Second), members: []string{"a", "c"}, root: 1, sync: true, applied: 10,
			lost: []Loss{{Worker: "b", Cause: LostNoReport}}},
		{name: "failure with dead member proceeds at once",
			snap: Snapshot{Gen: g3, Members: m(Active, "a", "b", "c"), Alive: alive("a", "c"), FirstReport: t0,
				Reports: map[string]Report{"a": {Worker: "a", Gen: 4, Applied: 9}, "c": {Worker: "c", Gen: 4, Applied: 9}}},
			now: t0, members: []string{"a", "c"}, root: 0, sync: true, applied: 9,
			lost: []Loss{{Worker: "b", Cause: LostHeartbeat}}},
		{name: "no survivor with state restores", snap: Snapshot{Gen: g3, Members: m(Active, "a"), Alive: alive("a"), FirstReport: t0,
			Reports: map[string]Report{"a": {Worker: "a", Gen: 4, Applied: NoState}}}, now: t0.Add(time.Second),
			members: []string{"a"}, root: 0, sync: true, applied: -1, restore: true},
		{name: "all members killed at once restores", snap: Snapshot{Gen: g3, Members: merge(m(Active, "a", "b", "c"), m(Ready, "d")), Alive: alive("d")},
			members: []string{"d"}, root: 0, sync: true, applied: -1, restore: true,
			lost: []Loss{{"a", LostHeartbeat}, {"b", LostHeartbeat}, {"c", LostHeartbeat}}},
		{name: "last member left restores", snap: Snapshot{Gen: g3, Members: m(Ready, "d"), Alive: alive("d")},
			members: []string{"d"}, root: 0, sync: true, applied: -1, restore: true},
		{name: "all gone and nobody ready", snap: Snapshot{Gen: g3, Members: map[string]Member{}, Alive: alive()}, wantWait: true},
		{name: "join names the joiners", snap: Snapshot{Gen: g3, Members: merge(m(Active, "a", "b", "c"), m(Ready, "d", "e")), Alive: alive("a", "b", "c", "d", "e")},
			members: []string{"a", "b", "c", "d", "e"}, root: 0, applied: -1, joiners: []string{"d", "e"}},
		// Reports name their generation; only the current one's count
		// (a report that landed after setgen cleared
		// the hash dropped healthy members from the next generation).
		{name: "stale report alone changes nothing",
			snap: Snapshot{Gen: g3, Members: m(Active, "a", "b", "c"), Alive: alive("a", "b", "c"), FirstReport: t0,
				Reports: map[string]Report{"a": {Worker: "a", Gen: 3, Applied: 9}}},
			now: t0.Add(time.Second)},
		{name: "stale report does not make a survivor",
			snap: Snapshot{Gen: g3, Members: m(Active, "a", "b", "c"), Alive: alive("a", "c"), FirstReport: t0,
				Reports: map[string]Report{"a": {Worker: "a", Gen: 4, Applied: 9}, "c": {Worker: "c", Gen: 3, Applied: 20}}},
			now: t0.Add(time.Second), members: []string{"a"}, root: 0, sync: true, applied: 9,
			lost: []Loss{{"b", LostHeartbeat}, {"c", LostNoReport}}},
		{name: "stale report does not turn a leave into a failure",
			snap: Snapshot{Gen: g3, Members: m(Active, "a", "c"), Alive: alive("a", "c"), FirstReport: t0,
				Reports: map[string]Report{"c": {Worker: "c", Gen: 3, Applied: 5}}},
			now: t0.Add(time.Second), members: []string{"a", "c"}, root: 0, applied: -1},
		// The last call: ready newcomers wait, up to LastCall after
		// ReadySince, for live workers still preparing.
		{name: "first waits for a preparing worker", snap: Snapshot{Members: merge(m(Ready, "a"), m(Preparing, "b")), Alive: alive("a", "b"),
			MinStart: 1, LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(time.Second), wantWait: true},
		{name: "first forms once it is ready", snap: Snapshot{Members: m(Ready, "a", "b"), Alive: alive("a", "b"),
			MinStart: 1, LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(time.Second),
			members: []string{"a", "b"}, root: -1, applied: -1},
		{name: "first forms when the last call ends", snap: Snapshot{Members: merge(m(Ready, "a"), m(Preparing, "b")), Alive: alive("a", "b"),
			MinStart: 1, LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(10 * time.Second),
			members: []string{"a"}, root: -1, applied: -1},
		{name: "first does not wait for a dead preparing worker", snap: Snapshot{Members: merge(m(Ready, "a"), m(Preparing, "b")), Alive: alive("a"),
			MinStart: 1, LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(time.Second),
			members: []string{"a"}, root: -1, applied: -1},
		{name: "first does not wait when full", snap: Snapshot{Members: merge(m(Ready, "a", "b"), m(Preparing, "c")), Alive: alive("a", "b", "c"),
			MinStart: 1, MaxWorkers: 2, LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(time.Second),
			members: []string{"a", "b"}, root: -1, applied: -1},
		{name: "first without a last call forms at once", snap: Snapshot{Members: merge(m(Ready, "a"), m(Preparing, "b")), Alive: alive("a", "b"), MinStart: 1},
			members: []string{"a"}, root: -1, applied: -1},
		{name: "join waits for a preparing worker", snap: Snapshot{Gen: g3, Members: merge(merge(m(Active, "a", "b", "c"), m(Ready, "d")), m(Preparing, "e")),
			Alive: alive("a", "b", "c", "d", "e"), LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(time.Second), wantWait: true},
		{name: "join forms when the last call ends", snap: Snapshot{Gen: g3, Members: merge(merge(m(Active, "a", "b", "c"), m(Ready, "d")), m(Preparing, "e")),
			Alive: alive("a", "b", "c", "d", "e"), LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(11 * time.Second),
			members: []string{"a", "b", "c", "d"}, root: 0, applied: -1, joiners: []string{"d"}},
		{name: "a leave does not wait for a preparing worker", snap: Snapshot{Gen: g3, Members: merge(merge(m(Active, "a", "c"), m(Ready, "d")), m(Preparing, "e")),
			Alive: alive("a", "c", "d", "e"), LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(time.Second),
			members: []string{"a", "c", "d"}, root: 0, applied: -1},
		{name: "a restore of newcomers waits for a preparing worker", snap: Snapshot{Gen: g3, Members: merge(m(Ready, "d"), m(Preparing, "e")),
			Alive: alive("d", "e"), LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(time.Second), wantWait: true},
		{name: "a restore of newcomers forms when the last call ends", snap: Snapshot{Gen: g3, Members: merge(m(Ready, "d"), m(Preparing, "e")),
			Alive: alive("d", "e"), LastCall: 10 * time.Second, ReadySince: t0}, now: t0.Add(10 * time.Second),
			members: []string{"d"}, root: 0, sync: true, applied: -1, restore: true},
		{name: "graceful leave is no loss",
			snap:    Snapshot{Gen: g3, Members: m(Active, "a", "c"), Alive: alive("a", "c")},
			members: []string{"a", "c"}, root: 0, applied: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			d := Decide(tc.snap, now, 500*time.Millisecond)
			if tc.members == nil {
				if d.Next != nil {
					t.Fatalf("got generation %+v, want none", d.Next)
				}
				if tc.wantWait != (d.Recheck > 0) {
					t.Fatalf("recheck %s, want wait %v", d.Recheck, tc.wantWait)
				}
				return
			}
			if d.Next == nil {
				t.Fatalf("got no generation, want members %v", tc.members)
			}
			g := d.Next
			if !slices.Equal(g.Members, tc.members) || g.Root != tc.root || g.Sync != tc.sync || g.LastApplied != tc.applied {
				t.Fatalf("got members %v root %d sync %v applied %d, want %v %d %v %d",
					g.Members, g.Root, g.Sync, g.LastApplied, tc.members, tc.root, tc.sync, tc.applied)
			}
			if g.Restore != tc.restore || !slices.Equal(g.Joiners, tc.joiners) {
				t.Fatalf("got restore %v joiners %v, want %v %v", g.Restore, g.Joiners, tc.restore, tc.joiners)
			}
			if !slices.Equal(d.Lost, tc.lost) {
				t.Fatalf("lost %v, want %v", d.Lost, tc.lost)
			}
			if g.Addrs[0] != g.Members[0]+":1" {
				t.Fatalf("addrs %v do not follow members", g.Addrs)
			}
		})
	}
}
