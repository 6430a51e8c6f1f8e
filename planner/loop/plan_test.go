package loop

import (
	"reflect"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

var at0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func code(c int) *int { return &c }

func workersIn(states ...jobs.WorkerState) []jobs.Worker {
	ws := make([]jobs.Worker, len(states))
	for i, st := range states {
		ws[i] = jobs.Worker{ID: "w" + string(rune('0'+i)), State: st, Node: "n1"}
	}
	return ws
}

func TestDecideFinish(t *testing.T) {
	withURL := func(ps *jobs.PlannerState) jobs.Job {
		return jobs.Job{ID: "j", State: jobs.Succeeded, Spec: jobs.Spec{CallbackURL: "http://x"}, Planner: ps}
	}
	cases := []struct {
		name                      string
		job                       jobs.Job
		sendingHere               bool
		teardown, inFlight, claim bool
		want                      jobs.PlannerState
	}{
		{"no callback: teardown and done", jobs.Job{ID: "j", State: jobs.Failed}, false, true, false, false,
			jobs.PlannerState{TornDown: true, Finished: true}},
		{"torn down, callback delivered: only the record", withURL(&jobs.PlannerState{TornDown: true, Callback: "delivered"}), false, false, false, false,
			jobs.PlannerState{TornDown: true, Callback: "delivered", Finished: true}},
		{"not sent yet: claim it with this fence", withURL(nil), false, true, false, true,
			jobs.PlannerState{TornDown: true, Callback: "sending", CallbackFence: 7}},
		{"sending from here: leave it", withURL(&jobs.PlannerState{TornDown: true, Callback: "sending", CallbackFence: 7}), true, false, true, false,
			jobs.PlannerState{TornDown: true, Callback: "sending", CallbackFence: 7}},
		{"claimed by a planner that is gone: claim again", withURL(&jobs.PlannerState{TornDown: true, Callback: "sending", CallbackFence: 3}), false, false, false, true,
			jobs.PlannerState{TornDown: true, Callback: "sending", CallbackFence: 7}},
		{"same fence but not in flight (restarted): claim again", withURL(&jobs.PlannerState{TornDown: true, Callback: "sending", CallbackFence: 7}), false, false, false, true,
			jobs.PlannerState{TornDown: true, Callback: "sending", CallbackFence: 7}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decideFinish(tc.job, 7, tc.sendingHere)
			if got.teardown != tc.teardown || got.inFlight != tc.inFlight || got.claim != tc.claim {
				t.Errorf("teardown, inFlight, claim = %v, %v, %v; want %v, %v, %v", got.teardown, got.inFlight, got.claim, tc.teardown, tc.inFlight, tc.claim)
			}
			if !reflect.DeepEqual(*got.state, tc.want) {
				t.Errorf("state = %+v; want %+v", *got.state, tc.want)
			}
		})
	}
}

func TestDecideSettle(t *testing.T) {
	exited := []jobs.Worker{{ID: "a", State: jobs.WorkerComplete, ExitCode: code(0)}, {ID: "b", State: jobs.WorkerFailed, ExitCode: code(137)}, {ID: "c", State: jobs.WorkerFailed}}
	cases := []struct {
		name       string
		state      jobs.State
		progress   jobs.Progress
		done       bool
		since      time.Duration // how long ago every worker had exited
		to         jobs.State
		due        time.Time
		viaRunning bool
		reason     string
	}{
		{"waits SettleAfter", jobs.Running, jobs.Progress{}, false, 4 * time.Second, "", at0.Add(6 * time.Second), false, ""},
		{"failed before its end", jobs.Running, jobs.Progress{Epoch: 1, TotalEpochs: 3}, false, 10 * time.Second, jobs.Failed, time.Time{}, false,
			"all 3 workers exited before the job finished (exit codes 0, 137, failed)"},
		{"progress at its last epoch", jobs.Running, jobs.Progress{Epoch: 3, TotalEpochs: 3}, false, 11 * time.Second, jobs.Succeeded, time.Time{}, false,
			"training finished; all 3 workers exited (exit codes 0, 137, failed)"},
		{"done marker, still starting: through running", jobs.Starting, jobs.Progress{}, true, 10 * time.Second, jobs.Succeeded, time.Time{}, true,
			"training finished; all 3 workers exited (exit codes 0, 137, failed)"},
		{"starting and failed: no detour", jobs.Starting, jobs.Progress{}, false, 10 * time.Second, jobs.Failed, time.Time{}, false,
			"all 3 workers exited before the job finished (exit codes 0, 137, failed)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &jobs.Job{ID: "j", State: tc.state, Progress: tc.progress}
			o := observed{job: j, tr: &tracked{exitedSince: at0.Add(-tc.since)}, workers: exited, done: tc.done}
			got := decideSettle(o, 10*time.Second, at0)
			if got.to != tc.to || !got.due.Equal(tc.due) || got.viaRunning != tc.viaRunning || got.reason != tc.reason {
				t.Errorf("got to=%q due=%v via=%v reason=%q; want to=%q due=%v via=%v reason=%q",
					got.to, got.due, got.viaRunning, got.reason, tc.to, tc.due, tc.viaRunning, tc.reason)
			}
			if got.to != "" && got.state == nil {
				t.Errorf("a settle step carries no planner state")
			}
		})
	}
}

func TestAllExitedAndCancelDone(t *testing.T) {
	cases := []struct {
		name      string
		state     jobs.State
		ws        []jobs.Worker
		allExited bool
		cancelled bool
	}{
		{"no workers", jobs.Running, nil, false, true},
		{"all exited", jobs.Running, workersIn(jobs.WorkerComplete, jobs.WorkerFailed), true, true},
		{"one running", jobs.Running, workersIn(jobs.WorkerComplete, jobs.WorkerRunning), false, false},
		{"one stopping", jobs.Running, workersIn(jobs.WorkerComplete, jobs.WorkerStopping), false, false},
		{"pending job", jobs.Pending, workersIn(jobs.WorkerFailed), false, true},
		{"starting job", jobs.Starting, workersIn(jobs.WorkerFailed), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &jobs.Job{ID: "j", State: tc.state}
			if got := allExited(j, tc.ws); got != tc.allExited {
				t.Errorf("allExited = %v; want %v", got, tc.allExited)
			}
			if got := cancelDone(tc.ws); got != tc.cancelled {
				t.Errorf("cancelDone = %v; want %v", got, tc.cancelled)
			}
		})
	}
}

func TestDecideScale(t *testing.T) {
	draining := []jobs.Worker{{ID: "a", State: jobs.WorkerRunning, Node: "n1", Draining: true}, {ID: "b", State: jobs.WorkerRunning, Node: "n2"}}
	cases := []struct {
		name                                   string
		state                                  jobs.State
		prev, current                          int
		live                                   []jobs.Worker
		target                                 int
		start, suspend, scale, resized, record bool
		count                                  int
		drain                                  []string
	}{
		{"queued job stays queued, never placed: no scale", jobs.Pending, 0, 0, nil, 0, false, false, false, false, true, 0, nil},
		{"queued job starts", jobs.Pending, 0, 0, nil, 2, true, false, true, true, true, 2, nil},
		{"running job at its size: nothing to record", jobs.Running, 2, 2, workersIn(jobs.WorkerRunning, jobs.WorkerRunning), 2, false, false, true, false, false, 2, nil},
		{"running job grows", jobs.Running, 2, 2, workersIn(jobs.WorkerRunning, jobs.WorkerRunning), 3, false, false, true, true, true, 3, nil},
		{"running job preempted", jobs.Running, 2, 2, workersIn(jobs.WorkerRunning, jobs.WorkerRunning), 0, false, true, true, true, true, 0, nil},
		{"suspended job resumes", jobs.Suspended, 0, 0, nil, 1, true, false, true, true, true, 1, nil},
		{"a worker on a draining node: grow elsewhere first", jobs.Running, 2, 2, draining, 2, false, false, true, false, false, 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &jobs.Job{ID: "j", State: tc.state, Reason: "queued",
				Workers: jobs.WorkerCount{Target: tc.prev, Current: tc.current}}
			o := observed{job: j, tr: &tracked{saved: at0}, live: tc.live}
			got := decideScale(o, planner.Target{Workers: tc.target, Reason: "policy"}, at0, time.Minute)
			if got.start != tc.start || got.suspend != tc.suspend || got.scale != tc.scale || got.resized != tc.resized || got.record != tc.record {
				t.Errorf("start, suspend, scale, resized, record = %v, %v, %v, %v, %v; want %v, %v, %v, %v, %v",
					got.start, got.suspend, got.scale, got.resized, got.record, tc.start, tc.suspend, tc.scale, tc.resized, tc.record)
			}
			if got.count != tc.count || !reflect.DeepEqual(got.drain, tc.drain) {
				t.Errorf("count %d, drain %v; want %d, %v", got.count, got.drain, tc.count, tc.drain)
			}
		})
	}
}

// TestDecideRound routes each job to its step: finished jobs to finish,
// cancelling ones to cancel, exited ones to settle (or a later round),
// the rest to the policy.
func TestDecideRound(t *testing.T) {
	mk := func(id string, st jobs.State, exitedAgo time.Duration) observed {
		tr := &tracked{throughput: map[int]float64{}}
		if exitedAgo > 0 {
			tr.exitedSince = at0.Add(-exitedAgo)
		}
		spec := jobs.Spec{Workers: jobs.WorkerRange{Min: 1, Max: 1}}
		return observed{job: &jobs.Job{ID: id, State: st, Spec: spec, CreatedAt: at0}, tr: tr,
			workers: workersIn(jobs.WorkerFailed)}
	}
	w := world{now: at0, capacity: jobs.Capacity{Nodes: []jobs.Node{{ID: "n1", Name: "n1", CPUSlots: 4, FreeCPUSlots: 4}}},
		finished: []jobs.Job{{ID: "done", State: jobs.Succeeded}},
		jobs: []observed{mk("c", jobs.Cancelling, 0), mk("s", jobs.Running, 20*time.Second),
			mk("wait", jobs.Running, 2*time.Second), mk("q", jobs.Pending, 0)}}
	cfg := DefaultConfig().withDefaults()
	p := decideRound(w, cfg, 1)
	ids := func(n int, id func(int) string) []string {
		var out []string
		for i := range n {
			out = append(out, id(i))
		}
		return out
	}
	got := map[string][]string{
		"finish": ids(len(p.finish), func(i int) string { return p.finish[i].job.ID }),
		"cancel": ids(len(p.cancel), func(i int) string { return p.cancel[i].job.ID }),
		"settle": ids(len(p.settle), func(i int) string { return p.settle[i].job.ID }),
		"scale":  ids(len(p.scale), func(i int) string { return p.scale[i].job.ID }),
	}
	want := map[string][]string{"finish": {"done"}, "cancel": {"c"}, "settle": {"s"}, "scale": {"q"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps %v; want %v", got, want)
	}
	if wantNext := at0.Add(cfg.SettleAfter - 2*time.Second); !p.next.Equal(wantNext) {
		t.Errorf("next round due %v; want %v (when the waiting job settles)", p.next, wantNext)
	}
	if p.scale[0].target.Workers != 1 || !p.scale[0].start {
		t.Errorf("the queued job's step %+v; want it started with 1 worker", p.scale[0])
	}
}

// TestDecideRoundRanksByServiceHistory: with enough succeeded jobs the
// round ranks by their service (the Gittins order), which can put a job
// with more attained service first; with too few, least attained service.
func TestDecideRoundRanksByServiceHistory(t *testing.T) {
	mk := func(id string, attained float64) observed {
		spec := jobs.Spec{Workers: jobs.WorkerRange{Min: 1, Max: 1}, GPUsPerWorker: 1}
		return observed{job: &jobs.Job{ID: id, State: jobs.Suspended, Spec: spec, CreatedAt: at0},
			tr: &tracked{throughput: map[int]float64{}, attained: attained}}
	}
	// Half the jobs that ran past an hour ended at 9,500 GPU seconds, half
	// at 50,000: at 9,000 a job is likely to end soon, at 3,700 it has
	// either 5,800 or 46,300 to go.
	var history []float64
	for range planner.MinServiceHistory {
		history = append(history, 9500, 50000)
	}
	w := world{now: at0, capacity: jobs.Capacity{Nodes: []jobs.Node{{ID: "n1", Name: "n1", GPUs: 1, FreeGPUs: 1}}},
		jobs: []observed{mk("less", 3700), mk("more", 9000)}}
	cfg := DefaultConfig().withDefaults()
	cfg.Policy.Cooldown = 0
	placed := func(w world) string {
		t.Helper()
		p := decideRound(w, cfg, 1)
		var got []string
		for _, s := range p.scale {
			if s.target.Workers > 0 {
				got = append(got, s.job.ID)
			}
		}
		if len(got) != 1 {
			t.Fatalf("placed %v on one GPU; want one job", got)
		}
		return got[0]
	}
	w.service = history[:planner.MinServiceHistory-1]
	if got := placed(w); got != "less" {
		t.Errorf("with %d succeeded jobs the GPU went to %q; want \"less\" (least attained service)", len(w.service), got)
	}
	w.service = history
	if got := placed(w); got != "more" {
		t.Errorf("with the history the GPU went to %q; want \"more\" (likelier to end soon)", got)
	}
	if h := serviceHistory(history, w.jobs); h.Len() != len(history) {
		t.Errorf("history of %d jobs; want %d", h.Len(), len(history))
	}
}

func TestWithAttained(t *testing.T) {
	j := jobs.Job{ID: "j", Planner: &jobs.PlannerState{AttainedGPUSeconds: 50, TornDown: true}}
	if got := withAttained(j, 80); got.Planner.AttainedGPUSeconds != 80 || !got.Planner.TornDown || j.Planner.AttainedGPUSeconds != 50 {
		t.Errorf("withAttained(50 -> 80) = %+v (input now %+v); want 80 on a copy", got.Planner, j.Planner)
	}
	if got := withAttained(j, 20); got.Planner.AttainedGPUSeconds != 50 {
		t.Errorf("withAttained(50, 20) = %g; want the record's 50 kept", got.Planner.AttainedGPUSeconds)
	}
	if got := withAttained(jobs.Job{ID: "n"}, 5); got.Planner == nil || got.Planner.AttainedGPUSeconds != 5 {
		t.Errorf("withAttained(no record, 5) = %+v; want 5", got.Planner)
	}
}
