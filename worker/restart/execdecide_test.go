package restart

import (
	"errors"
	"testing"

	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
)

func gen(n int64, members ...string) *coord.Generation {
	return &coord.Generation{Number: n, Members: members}
}

func TestJudgePeers(t *testing.T) {
	g := gen(4, "a", "b", "c")
	all := func() peerView {
		return peerView{Latest: 4, Reported: map[string]int64{},
			State: map[string]coord.MemberState{"a": coord.Active, "b": coord.Active, "c": coord.Active},
			Alive: map[string]bool{"a": true, "b": true, "c": true}}
	}
	tests := []struct {
		name    string
		edit    func(*peerView)
		want    execSignal
		wantWho string
	}{
		{"all well", func(*peerView) {}, sigNone, ""},
		{"done", func(v *peerView) { v.Done = true; v.Alive["b"] = false }, sigDone, ""},
		{"newer generation", func(v *peerView) { v.Latest = 5 }, sigNewer, ""},
		{"peer reported", func(v *peerView) { v.Reported["c"] = 4 }, sigPeerFailed, "c"},
		{"stale report ignored", func(v *peerView) { v.Reported["c"] = 3 }, sigNone, ""},
		{"my own report ignored", func(v *peerView) { v.Reported["a"] = 4 }, sigNone, ""},
		{"peer died: record, no heartbeat", func(v *peerView) { v.Alive["b"] = false }, sigPeerFailed, "b"},
		{"peer leaving", func(v *peerView) { v.State["b"] = coord.Leaving }, sigPeerLeft, "b"},
		{"peer left: record and heartbeat gone", func(v *peerView) { delete(v.State, "c"); v.Alive["c"] = false }, sigPeerLeft, "c"},
		{"failure beats leave", func(v *peerView) { v.State["b"] = coord.Leaving; v.Alive["c"] = false }, sigPeerFailed, "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := all()
			tc.edit(&v)
			got, who := judgePeers(g, "a", v)
			if got != tc.want || who != tc.wantWho {
				t.Errorf("judgePeers = %v %q, want %v %q", got, who, tc.want, tc.wantWho)
			}
		})
	}
}

func TestJudgeExit(t *testing.T) {
	tests := []struct {
		name string
		rank int
		res  core.ProgramResult
		want core.ExitVerdict
	}{
		{"rank 0 exits 0", 0, core.ProgramResult{}, core.ExitSucceeded},
		{"rank 1 exits 0", 1, core.ProgramResult{}, core.ExitFinished},
		{"rank 0 exits 1", 0, core.ProgramResult{Code: 1}, core.ExitFailed},
		{"rank 2 killed", 2, core.ProgramResult{Code: -1, Signal: "SIGKILL"}, core.ExitFailed},
		{"not started", 0, core.ProgramResult{Code: -1, StartErr: errors.New("no such file")}, core.ExitFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := core.JudgeExit(tc.rank, tc.res); got != tc.want {
				t.Errorf("judgeExit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCountsAsRestart(t *testing.T) {
	tests := []struct {
		name       string
		prev, next *coord.Generation
		failed     bool
		want       bool
	}{
		{"same members after a failure", gen(3, "a", "b"), gen(4, "a", "b"), true, true},
		{"one worker restarted", gen(3, "a"), gen(4, "a"), true, true},
		{"failure plus a newcomer", gen(3, "a", "b"), gen(4, "a", "b", "c"), true, true},
		{"a member was lost", gen(3, "a", "b"), gen(4, "a"), true, false},
		{"no failure: a join", gen(3, "a"), gen(4, "a", "b"), false, false},
		{"not newer", gen(4, "a"), gen(4, "a"), true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := countsAsRestart(tc.prev, tc.next, tc.failed); got != tc.want {
				t.Errorf("countsAsRestart = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJudgeBarrier(t *testing.T) {
	g := gen(5, "a", "b")
	base := func() barrierView {
		return barrierView{Latest: 5, Entries: map[string]execEntry{"a": {Port: 1234}, "b": {}},
			Alive: map[string]bool{"a": true, "b": true, "old": true}}
	}
	tests := []struct {
		name      string
		edit      func(*barrierView)
		wantReady bool
		wantSig   execSignal
		wantWho   string
	}{
		{"everyone set, no root yet", func(*barrierView) {}, true, sigNone, ""},
		{"waits for a member", func(v *barrierView) { delete(v.Entries, "b") }, false, sigNone, "b"},
		{"member died", func(v *barrierView) { delete(v.Entries, "b"); v.Alive["b"] = false }, false, sigPeerFailed, "b"},
		{"newer generation", func(v *barrierView) { v.Latest = 6 }, false, sigNewer, ""},
		{"done", func(v *barrierView) { v.Done = true }, false, sigDone, ""},
		{"old root still syncing", func(v *barrierView) { v.Root = &rootRecord{Gen: 4, Worker: "old"} }, false, sigNone, "old"},
		{"old root synced", func(v *barrierView) { v.Root = &rootRecord{Gen: 4, Worker: "old", Synced: true} }, true, sigNone, ""},
		{"old root dead", func(v *barrierView) { v.Root = &rootRecord{Gen: 4, Worker: "old"}; v.Alive["old"] = false }, true, sigNone, ""},
		{"new root already started", func(v *barrierView) { v.Root = &rootRecord{Gen: 5, Worker: "a"} }, true, sigNone, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := base()
			tc.edit(&v)
			ready, sig, who := judgeBarrier(g, v)
			if ready != tc.wantReady || sig != tc.wantSig || who != tc.wantWho {
				t.Errorf("judgeBarrier = %v %v %q, want %v %v %q", ready, sig, who, tc.wantReady, tc.wantSig, tc.wantWho)
			}
		})
	}
}
