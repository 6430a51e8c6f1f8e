package restart

import (
	"github.com/edl-nomad/edl/worker/coord"
)

// Exec mode's decisions, pure functions of what one look at Redis (or a
// program's exit) says; execgen.go acts on them.

// peerView is one look at a generation's members and the job.
type peerView struct {
	Latest   int64                        // the current generation's number
	Done     bool                         // the job's training ended
	Reported map[string]int64             // worker -> generation it reported broken
	State    map[string]coord.MemberState // member records ("" when gone)
	Alive    map[string]bool              // heartbeats
}

// execSignal is what a running generation must do.
type execSignal int

const (
	sigNone       execSignal = iota
	sigDone                  // the job ended: stop the program and exit
	sigNewer                 // a newer generation exists: stop and go to it
	sigPeerFailed            // a member's program failed or its worker died: stop, report, wait
	sigPeerLeft              // a member leaves or left: stop and wait for the leader's next generation
)

func (s execSignal) String() string {
	return [...]string{"none", "done", "newer generation", "peer failed", "peer left"}[s]
}

// judgePeers says what worker me, a member of g, must do, and names the
// member that caused it. A failure (a member's report, or its record
// without a heartbeat: it died) goes before a leave (its record marked
// leaving, or gone with its heartbeat).
func judgePeers(g *coord.Generation, me string, v peerView) (execSignal, string) {
	switch {
	case v.Done:
		return sigDone, ""
	case v.Latest > g.Number:
		return sigNewer, ""
	}
	left := ""
	for _, id := range g.Members {
		if id == me {
			continue
		}
		state, hasRecord := v.State[id]
		switch {
		case hasReport(v, id) && v.Reported[id] >= g.Number:
			return sigPeerFailed, id
		case !hasRecord || state == coord.Leaving:
			// A graceful leave deletes record and heartbeat together.
			if left == "" {
				left = id
			}
		case !v.Alive[id]:
			return sigPeerFailed, id // record without heartbeat: it died
		}
	}
	if left != "" {
		return sigPeerLeft, left
	}
	return sigNone, ""
}

func hasReport(v peerView, id string) bool {
	_, ok := v.Reported[id]
	return ok
}

// countsAsRestart reports whether next, following prev, restarts a failed
// program (and so counts against max_restarts, as torchrun counts
// restart_count): a program of prev failed on its own and every member of
// prev is in next. When a member was lost (killed, removed, gone), the
// failures were its consequence: a membership change, which torchrun does
// not count either.
func countsAsRestart(prev, next *coord.Generation, failed bool) bool {
	if !failed || prev == nil || next == nil || next.Number <= prev.Number {
		return false
	}
	for _, id := range prev.Members {
		if next.Rank(id) < 0 {
			return false
		}
	}
	return true
}

// barrierView is one look at a generation's start barrier.
type barrierView struct {
	Latest  int64
	Done    bool
	Entries map[string]execEntry // members that stopped their program and are set
	Root    *rootRecord          // the last program generation's rank 0
	Alive   map[string]bool      // heartbeats of g's members and of Root.Worker
}

// judgeBarrier says whether g's programs may start: every member has
// stopped its old program and written its entry, and the rank 0 of the
// last program generation has synced its checkpoint folder to the store
// (or is dead, or a newer root already took over). Otherwise it says why
// g will not start (a newer generation, a lost member) or that it must
// wait (sigNone, false).
func judgeBarrier(g *coord.Generation, v barrierView) (ready bool, sig execSignal, who string) {
	switch {
	case v.Done:
		return false, sigDone, ""
	case v.Latest > g.Number:
		return false, sigNewer, ""
	}
	for _, id := range g.Members {
		if !v.Alive[id] {
			return false, sigPeerFailed, id
		}
	}
	for _, id := range g.Members {
		if _, ok := v.Entries[id]; !ok {
			return false, sigNone, id
		}
	}
	if r := v.Root; r != nil && !r.Synced && r.Gen < g.Number && v.Alive[r.Worker] {
		return false, sigNone, r.Worker
	}
	return true, sigNone, ""
}
