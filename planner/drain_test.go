package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
	"github.com/google/go-cmp/cmp"
)

func TestPlanDrain(t *testing.T) {
	w := func(i int, node string, st jobs.WorkerState, drain bool) jobs.Worker {
		return jobs.Worker{ID: fmt.Sprintf("w%d", i), Index: i, Node: node, State: st, Draining: drain}
	}
	queued := func(i int) jobs.Worker {
		return jobs.Worker{ID: fmt.Sprintf("queued-%d", i), Index: i, State: jobs.WorkerPending, Queued: true}
	}
	run, pend := jobs.WorkerRunning, jobs.WorkerPending
	tests := []struct {
		name   string
		target int
		ws     []jobs.Worker
		count  int
		remove []string
		reason string
	}{
		{"no drain: the target as it is", 3, []jobs.Worker{w(0, "a", run, false), w(1, "a", run, false)}, 3, nil, ""},
		{"grow elsewhere first", 2, []jobs.Worker{w(0, "d", run, true), w(1, "d", run, true)}, 4, nil,
			"move off draining node d: 2 worker(s) keep training until 2 start elsewhere"},
		{"replacements queued do not free anyone", 2, []jobs.Worker{w(0, "d", run, true), w(1, "d", run, true), queued(2), queued(3)}, 4, nil,
			"keep training until 2 start elsewhere"},
		{"one replacement runs: the highest draining index leaves", 2,
			[]jobs.Worker{w(0, "d", run, true), w(1, "d", run, true), w(2, "b", run, false), w(3, "b", pend, false)}, 4, []string{"w1"},
			"move off draining node d: 1 worker(s) leave, 1 wait for 1 starting elsewhere"},
		{"all replacements run: every draining worker leaves", 2,
			[]jobs.Worker{w(0, "d", run, true), w(1, "d", run, true), w(2, "b", run, false), w(3, "b", run, false)}, 4, []string{"w1", "w0"},
			"move off draining node d: 2 worker(s) leave, 2 run elsewhere"},
		{"a pending draining worker goes at once", 2,
			[]jobs.Worker{w(0, "d", run, true), w(1, "d", pend, true)}, 4, []string{"w1"}, "1 worker(s) leave"},
		{"less room elsewhere: shrink while moving", 1,
			[]jobs.Worker{w(0, "d", run, true), w(1, "d", run, true), w(2, "d", run, true), w(3, "b", run, false)}, 4, []string{"w2", "w1", "w0"},
			"3 worker(s) leave, 1 run elsewhere"},
		{"finished and stopping workers do not count", 1,
			[]jobs.Worker{w(0, "d", jobs.WorkerComplete, true), w(1, "d", jobs.WorkerStopping, true), w(2, "b", run, false)}, 1, nil, ""},
		{"no other room: suspend and say so", 0, []jobs.Worker{w(0, "d", run, true), w(1, "e", run, true)}, 0, nil,
			"suspend (had 2): node d,e draining and no other node has room"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dp := PlanDrain(Target{JobID: "j", Workers: tc.target, Reason: "keep"}, tc.ws)
			if dp.Count != tc.count || !cmp.Equal(dp.Remove, tc.remove) {
				t.Errorf("count %d remove %v, want %d %v", dp.Count, dp.Remove, tc.count, tc.remove)
			}
			if (tc.reason == "") != (dp.Reason == "") || !strings.Contains(dp.Reason, tc.reason) {
				t.Errorf("reason %q, want %q", dp.Reason, tc.reason)
			}
		})
	}
}
