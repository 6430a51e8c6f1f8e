package coord

import (
	"slices"
	"sort"
	"time"
)

// Snapshot is what the leader reads before deciding on a new generation.
type Snapshot struct {
	Gen     *Generation // nil before the first
	Members map[string]Member
	Alive   map[string]bool // heartbeat present, by worker
	Reports map[string]Report
	// FirstReport is when the leader first saw the current reports.
	FirstReport time.Time
	MinStart    int // workers ready before generation 1 forms
	MaxWorkers  int // 0: no limit
	// LastCall is how long ready newcomers wait for live workers still
	// preparing before a first generation or a join admits them, so that
	// workers started together start (or join) together: a program that
	// restarts at every change (exec mode) starts once, not once per
	// worker; likewise a restore when every member is gone. 0: no wait.
	// Failures with survivors and leaves never wait.
	LastCall time.Duration
	// ReadySince is when the leader first saw the ready newcomers it has
	// not admitted yet; the last call ends LastCall after it.
	ReadySince time.Time
}

// NoState is the applied step a worker reports when it holds no training
// state (it never synced); -1 means the initial state, before any step.
const NoState int64 = -2

// Decision is what Decide returns: a generation to write, or nothing and
// when to look again.
type Decision struct {
	Next    *Generation
	Recheck time.Duration // 0: only on the next event
	// Lost are the members of the current generation that Next drops
	// without their having left gracefully, with the cause, in rank order.
	Lost []Loss
}

// LossCause is why a member was dropped without leaving.
type LossCause string

const (
	// LostHeartbeat: its heartbeat lease lapsed (the process died, froze
	// or lost Redis).
	LostHeartbeat LossCause = "heartbeat_lapsed"
	// LostNoReport: its peers' ring broke and it filed no failure report
	// in the report window while its heartbeat went on (a frozen step
	// loop, or a worker cut off from its peers but not from Redis).
	LostNoReport LossCause = "ring_broken_no_report"
)

// Describe says a cause in words, for a job event.
func (c LossCause) Describe() string {
	switch c {
	case LostHeartbeat:
		return "its heartbeat lease lapsed"
	case LostNoReport:
		return "the ring broke and it sent no failure report in time"
	}
	return string(c)
}

// Loss is one member dropped from a generation without a graceful leave.
type Loss struct {
	Worker string
	Cause  LossCause
}

// Decide picks the next generation, if any, from a snapshot. It does no I/O.
// In order: form the first generation once MinStart workers are ready; after
// a broken ring, once every member has reported or is dead (or window has
// passed), form one of the survivors whose root is the one that applied the
// most steps; drop members that left gracefully; admit ready newcomers.
//
// A member missing from the members hash left gracefully (it deleted its
// record); any other member that the next generation leaves out is listed
// in Decision.Lost.
func Decide(s Snapshot, now time.Time, window time.Duration) Decision {
	d := s.decide(now, window)
	if d.Next != nil && s.Gen != nil {
		d.Lost = s.lost(d.Next)
	}
	return d
}

// lost lists the members of the current generation that next leaves out
// although they did not leave.
func (s Snapshot) lost(next *Generation) []Loss {
	var out []Loss
	for _, id := range s.Gen.Members {
		if next.Rank(id) >= 0 {
			continue
		}
		if _, ok := s.Members[id]; !ok {
			continue // left gracefully: its own event says so
		}
		cause := LostNoReport
		if !s.Alive[id] {
			cause = LostHeartbeat
		}
		out = append(out, Loss{Worker: id, Cause: cause})
	}
	return out
}

// ReasonStart is the Reason of a job's first generation: no member ran
// in one before it.
const ReasonStart = "start"

func (s Snapshot) decide(now time.Time, window time.Duration) Decision {
	newcomers := s.newcomers()
	if s.Gen == nil {
		if len(newcomers) < max(1, s.MinStart) {
			return Decision{}
		}
		if wait := s.lastCall(now, len(newcomers)); wait > 0 {
			return Decision{Recheck: wait}
		}
		return Decision{Next: s.next(nil, newcomers, -1, false, -1, ReasonStart)}
	}
	g := s.Gen
	reports := s.current()
	if len(reports) > 0 {
		var pending, survivors []string
		for _, id := range g.Members {
			_, rep := reports[id]
			switch {
			case rep && s.Alive[id]:
				survivors = append(survivors, id)
			case !rep && s.Alive[id]:
				pending = append(pending, id)
			}
		}
		if wait := s.FirstReport.Add(window).Sub(now); len(pending) > 0 && wait > 0 {
			return Decision{Recheck: wait}
		}
		root, best := -1, int64(NoState)
		for i, id := range survivors {
			if a := reports[id].Applied; a > best {
				root, best = i, a
			}
		}
		if root < 0 {
			// Nobody who holds the training state survived.
			return s.restore(survivors, newcomers, window)
		}
		return Decision{Next: s.next(survivors, newcomers, root, true, best, "failure")}
	}
	var stay []string
	anyAlive := false
	for _, id := range g.Members {
		if _, ok := s.Members[id]; ok {
			stay = append(stay, id)
		}
		anyAlive = anyAlive || s.Alive[id]
	}
	if len(stay) == 0 || !anyAlive {
		// Every member left or died without a report (all killed at once).
		// Nothing runs: newcomers may as well wait for those preparing.
		if wait := s.lastCall(now, len(newcomers)); len(newcomers) > 0 && wait > 0 {
			return Decision{Recheck: wait}
		}
		return s.restore(nil, newcomers, window)
	}
	if len(stay) < len(g.Members) && len(stay) > 0 {
		return Decision{Next: s.next(stay, newcomers, 0, false, -1, "leave")}
	}
	if len(newcomers) > 0 && len(stay) > 0 && (s.MaxWorkers == 0 || len(stay) < s.MaxWorkers) {
		if wait := s.lastCall(now, len(stay)+len(newcomers)); wait > 0 {
			return Decision{Recheck: wait}
		}
		g := s.next(stay, newcomers, 0, false, -1, "join")
		g.Joiners = slices.Clone(g.Members[len(stay):])
		return Decision{Next: g}
	}
	return Decision{}
}

// current returns the reports of members of the current generation about
// that generation. A report of an older one says nothing about this ring
// (it was written after the generation it describes was replaced; the
// report script refuses those, this guards the decision too).
func (s Snapshot) current() map[string]Report {
	var out map[string]Report
	for _, id := range s.Gen.Members {
		if r, ok := s.Reports[id]; ok && r.Gen == s.Gen.Number {
			if out == nil {
				out = map[string]Report{}
			}
			out[id] = r
		}
	}
	return out
}

// restore forms a generation of the live workers that hold no training
// state; its root restores the newest checkpoint.
func (s Snapshot) restore(survivors, newcomers []string, window time.Duration) Decision {
	if len(survivors)+len(newcomers) == 0 {
		return Decision{Recheck: window}
	}
	g := s.next(survivors, newcomers, 0, true, -1, "restore")
	g.Restore = true
	return Decision{Next: g}
}

// lastCall is how much longer the ready newcomers wait, a generation of
// size members being possible now, for live workers outside the
// generation still preparing (0: form it now). The wait ends LastCall
// after ReadySince, when no worker prepares any more, or when the
// generation would be full without them.
func (s Snapshot) lastCall(now time.Time, size int) time.Duration {
	if s.LastCall <= 0 || s.MaxWorkers > 0 && size >= s.MaxWorkers {
		return 0
	}
	wait := s.ReadySince.Add(s.LastCall).Sub(now)
	if wait <= 0 || !s.preparing() {
		return 0
	}
	return wait
}

// preparing says whether a live worker outside the current generation is
// still preparing (it will be ready soon).
func (s Snapshot) preparing() bool {
	for id, m := range s.Members {
		if m.State == Preparing && s.Alive[id] && s.Gen.Rank(id) < 0 {
			return true
		}
	}
	return false
}

// newcomers are live, ready workers outside the current generation, oldest first.
func (s Snapshot) newcomers() []string {
	var out []string
	for id, m := range s.Members {
		if m.State == Ready && s.Alive[id] && s.Gen.Rank(id) < 0 {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := s.Members[out[i]], s.Members[out[j]]
		if !a.Since.Equal(b.Since) {
			return a.Since.Before(b.Since)
		}
		return a.ID < b.ID
	})
	return out
}

func (s Snapshot) next(keep, newcomers []string, root int, sync bool, applied int64, reason string) *Generation {
	members := slices.Clone(keep)
	for _, id := range newcomers {
		if s.MaxWorkers > 0 && len(members) >= s.MaxWorkers {
			break
		}
		members = append(members, id)
	}
	addrs := make([]string, len(members))
	for i, id := range members {
		addrs[i] = s.Members[id].Addr
	}
	n := int64(1)
	if s.Gen != nil {
		n = s.Gen.Number + 1
	}
	return &Generation{Number: n, Members: members, Addrs: addrs, Root: root, Sync: sync, LastApplied: applied, Reason: reason}
}
