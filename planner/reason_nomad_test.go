package planner

import (
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

// TestReasonsSayWhatHappened: reasons seen on a real
// Nomad cluster that misled users.
func TestReasonsSayWhatHappened(t *testing.T) {
	tests := []struct {
		name, job, want, not string
		snap                 func() Snapshot
	}{
		{
			name: "more GPUs per worker than any node has, no constraint",
			job:  "big", want: "needs 8 GPUs per worker; the largest schedulable node has 4", not: "constraint",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 2, 4, v100)}, Jobs: []JobState{job("big", 1, 2, gpw(8))}}
			},
		},
		{
			name: "every node drains",
			job:  "a", want: "suspend (had 2): no schedulable node (every node is down, ineligible or draining)", not: "preempted",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: []jobs.Node{}}, Jobs: []JobState{job("a", 1, 2)}}
				s.Jobs[0].Current, s.Jobs[0].Placement = 2, map[string]int{"drained": 2}
				return s
			},
		},
		{
			name: "constraint nobody matches",
			job:  "a", want: "no node matches its GPU constraint (model=H200) (or those that do are down, ineligible or draining)",
			snap: func() Snapshot {
				return Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 4, v100)}, Jobs: []JobState{job("a", 1, 2, constraint("H200", 0))}}
			},
		},
		{
			name: "a tenant's pin",
			job:  "a", want: "resize 3 -> 1: pinned to 1 by the tenant", not: "above maximum",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 4, v100)}, Jobs: []JobState{job("a", 1, 4, pinned(1))}}
				running(&s, "a", map[string]int{"n-0": 3})
				return s
			},
		},
		{
			name: "a failed worker replaced",
			job:  "a", want: "replace 1 lost worker(s): 1 -> 2", not: "spare capacity",
			snap: func() Snapshot {
				s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 2, v100)}, Jobs: []JobState{job("a", 1, 2)}}
				running(&s, "a", map[string]int{"n-0": 1})
				s.Jobs[0].Target = 2
				return s
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.snap(), t0)
			tg, ok := p.Target(tc.job)
			if !ok {
				t.Fatalf("no target for %s", tc.job)
			}
			if !strings.Contains(tg.Reason, tc.want) || (tc.not != "" && strings.Contains(tg.Reason, tc.not)) {
				t.Errorf("reason %q, want it to contain %q and not %q", tg.Reason, tc.want, tc.not)
			}
		})
	}
}
