package nomadtest

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// settle waits for the server's asynchronous work.
func settle(t *testing.T, s *Server) {
	t.Helper()
	if !s.Settle(5 * time.Second) {
		t.Fatal("nomadtest did not settle in 5s")
	}
}

// TestAsyncReplayMatchesRecordedStates replays the recorded sequence with
// asynchronous placement: each write answers before its allocations exist
// (the evaluation pending), and once the scheduler ran the states are the
// recorded ones.
func TestAsyncReplayMatchesRecordedStates(t *testing.T) {
	s := New(t, Config{})
	u := s.URL()
	r := do(t, "PUT", u+"/v1/jobs", readFixture(t, "job-register.request.json"))
	if r.status != 200 {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	evalID := decode(t, r.body).(map[string]any)["EvalID"].(string)
	if got := decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body); len(got.([]any)) != 0 {
		t.Errorf("allocations in the register answer's wake: %d, want 0 (placement is asynchronous)", len(got.([]any)))
	}
	evals := decode(t, do(t, "GET", u+"/v1/job/train-fx/evaluations", nil).body).([]any)
	if len(evals) != 1 || evals[0].(map[string]any)["ID"] != evalID || evals[0].(map[string]any)["Status"] != "pending" {
		t.Errorf("evaluation right after register = %v, want %s pending", evals, evalID)
	}
	settle(t, s)
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations.json")), allocSummary(decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body))); d != "" {
		t.Errorf("allocations after register (-recorded +got):\n%s", d)
	}
	do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-up.request.json"))
	settle(t, s)
	do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-down.request.json"))
	settle(t, s)
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations-after-scale-in.json")), allocSummary(decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body))); d != "" {
		t.Errorf("allocations after scale-in (-recorded +got):\n%s", d)
	}
	var stopID string
	for _, a := range s.Allocations("default", "train-fx") {
		if a.Name == "train-fx.workers[1]" && a.DesiredStatus == "run" {
			stopID = a.ID
		}
	}
	do(t, "POST", u+"/v1/allocation/"+stopID+"/stop", nil)
	settle(t, s)
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations-after-stop.json")), allocSummary(decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body))); d != "" {
		t.Errorf("allocations after alloc stop (-recorded +got):\n%s", d)
	}
	do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-over-capacity.request.json"))
	settle(t, s)
	wantSummary(t, decode(t, do(t, "GET", u+"/v1/job/train-fx/summary", nil).body), fixture(t, "job-summary-queued.json"))
	wantGroupStatus(t, decode(t, do(t, "GET", u+"/v1/job/train-fx/scale", nil).body), fixture(t, "job-scale-status-queued.json"))
	wantBlockedEval(t, decode(t, do(t, "GET", u+"/v1/job/train-fx/evaluations", nil).body))
	// The job list carries the same summary (one read for every job).
	list := decode(t, do(t, "GET", u+"/v1/jobs?prefix=train", nil).body).([]any)
	if len(list) != 1 {
		t.Fatalf("job list = %v", list)
	}
	q := list[0].(map[string]any)["JobSummary"].(map[string]any)["Summary"].(map[string]any)["workers"].(map[string]any)["Queued"]
	if q != json.Number("1") {
		t.Errorf("job list Queued = %v, want 1", q)
	}
}

// TestStoppingAllocationKeepsRunningWhileItsDevicesAreFree: a scaled-in
// allocation stays client-running until its task exits, but the scheduler
// already hands its GPU to the next placement.
func TestStoppingAllocationKeepsRunningWhileItsDevicesAreFree(t *testing.T) {
	s := New(t, Config{Nodes: []NodeSpec{{Name: "n", GPUs: 2}}, ExitDelay: time.Hour})
	c := s.Client()
	if _, _, err := c.Jobs().Register(batchJob("a", 2, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if _, _, err := c.Jobs().Register(batchJob("b", 1, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if got := summaryOf(t, c, "b").Queued; got != 1 {
		t.Fatalf("b queued = %d, want 1 (both GPUs held)", got)
	}
	if _, _, err := c.Jobs().Scale("a", "workers", ptr(1), "", false, nil, nil); err != nil {
		t.Fatal(err)
	}
	// The exit takes an hour: wait for b's placement, not for settling.
	deadline := time.Now().Add(5 * time.Second)
	for len(placed(s, "b")) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := placed(s, "b"); len(got) != 1 || got[0] != "n:[gpu1]" {
		t.Fatalf("b placed = %v, want n:[gpu1] (the stopping allocation's GPU)", got)
	}
	for _, a := range s.Allocations("default", "a") {
		if a.Name == "a.workers[1]" && (a.DesiredStatus != "stop" || a.ClientStatus != "running") {
			t.Errorf("a.workers[1] = %s/%s, want stop/running until its task exits", a.DesiredStatus, a.ClientStatus)
		}
	}
}

// TestRestartWithJitterThenModeFail: a task exit restarts in place after
// the policy's delay plus up to 25% jitter; with attempts used up and mode
// "fail" the allocation fails and, with reschedule attempts 0, is not
// replaced: the job is dead (the recorded behaviour).
func TestRestartWithJitterThenModeFail(t *testing.T) {
	s := New(t, Config{TimeScale: 0.01})
	c := s.Client()
	j := batchJob("r", 1, nil)
	j.TaskGroups[0].RestartPolicy = &api.RestartPolicy{Attempts: ptr(1), Delay: ptr(time.Second), Interval: ptr(time.Minute), Mode: ptr("fail")}
	j.TaskGroups[0].ReschedulePolicy = &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)}
	if _, _, err := c.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	id := s.Allocations("default", "r")[0].ID
	if err := s.ExitTask(id, 3); err != nil {
		t.Fatal(err)
	}
	a := s.Allocations("default", "r")[0]
	ts := a.TaskStates["worker"]
	last := ts.Events[len(ts.Events)-1]
	if a.ClientStatus != "pending" || ts.Restarts != 1 || last.Type != api.TaskRestarting {
		t.Fatalf("after first exit: %s restarts=%d last=%s, want pending, 1, Restarting", a.ClientStatus, ts.Restarts, last.Type)
	}
	if d := time.Duration(last.StartDelay); d < 10*time.Millisecond || d > 12500*time.Microsecond {
		t.Errorf("restart delay %s, want 10ms..12.5ms (1s x TimeScale plus up to 25%% jitter)", d)
	}
	settle(t, s)
	if a := s.Allocations("default", "r")[0]; a.ClientStatus != "running" {
		t.Fatalf("after the restart delay: %s, want running", a.ClientStatus)
	}
	if err := s.ExitTask(id, 3); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	all := s.Allocations("default", "r")
	if len(all) != 1 || all[0].ClientStatus != "failed" || *s.Job("default", "r").Status != "dead" {
		t.Errorf("after the second exit: %d allocations, %s, job %s; want 1 failed, dead", len(all), all[0].ClientStatus, *s.Job("default", "r").Status)
	}
}

// TestDrainMigratesBatchWorkAtTheDeadline: two nodes; draining one keeps
// its batch allocations running until the deadline, then replaces them on
// the other node under the same names, and the drain completes.
func TestDrainMigratesBatchWorkAtTheDeadline(t *testing.T) {
	s := New(t, Config{Nodes: []NodeSpec{{Name: "n1", GPUs: 2, UniqueGPUIDs: true}, {Name: "n2", GPUs: 2, UniqueGPUIDs: true}}})
	c := s.Client()
	if _, _, err := c.Jobs().Register(batchJob("d", 2, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if got := placed(s, "d"); !cmp.Equal(got, []string{"n1:[n1-gpu0]", "n1:[n1-gpu1]"}) {
		t.Fatalf("placed = %v", got)
	}
	if err := s.Drain("n1", 150*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name == "n1" && (!n.Drain || n.SchedulingEligibility != "ineligible") {
			t.Errorf("n1 while draining: drain=%v %s", n.Drain, n.SchedulingEligibility)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := placed(s, "d"); !cmp.Equal(got, []string{"n1:[n1-gpu0]", "n1:[n1-gpu1]"}) {
		t.Errorf("before the deadline placed = %v, want both still on n1 (batch work waits for the deadline)", got)
	}
	settle(t, s)
	if got := placed(s, "d"); !cmp.Equal(got, []string{"n2:[n2-gpu0]", "n2:[n2-gpu1]"}) {
		t.Errorf("after the deadline placed = %v, want both on n2", got)
	}
	var names []string
	for _, a := range s.Allocations("default", "d") {
		if a.NodeName == "n1" {
			names = append(names, a.Name+" "+a.DesiredDescription)
		}
	}
	sort.Strings(names)
	if d := cmp.Diff([]string{"d.workers[0] alloc is being migrated", "d.workers[1] alloc is being migrated"}, names); d != "" {
		t.Errorf("migrated allocations (-want +got):\n%s", d)
	}
	nodes, _, _ = c.Nodes().List(nil)
	for _, n := range nodes {
		if n.Name == "n1" && (n.Drain || n.SchedulingEligibility != "ineligible" || n.LastDrain == nil || n.LastDrain.Status != api.DrainStatusComplete) {
			t.Errorf("n1 after the drain: drain=%v %s last=%+v, want complete and ineligible", n.Drain, n.SchedulingEligibility, n.LastDrain)
		}
	}
}

// TestConstraintMissTexts: Nomad filters a node without a matching device
// group ("missing devices") and reports a matching but busy one exhausted
// ("devices: no devices match request", the recorded text).
func TestConstraintMissTexts(t *testing.T) {
	s := New(t, Config{Nodes: []NodeSpec{{Name: "n", GPUs: 2, Model: "H200"}}})
	c := s.Client()
	model := &api.Constraint{LTarget: "${device.model}", Operand: "=", RTarget: "A100"}
	for _, j := range []*api.Job{batchJob("model", 1, gpus(1, model)), batchJob("eight", 1, gpus(8)), batchJob("fill", 3, gpus(1))} {
		if _, _, err := c.Jobs().Register(j, nil); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, s)
	var rec []map[string]any
	if err := json.Unmarshal(readFixture(t, "job-evaluations-blocked.json"), &rec); err != nil {
		t.Fatal(err)
	}
	recText := ""
	for k := range rec[0]["FailedTGAllocs"].(map[string]any)["workers"].(map[string]any)["DimensionExhausted"].(map[string]any) {
		recText = k
	}
	for _, tc := range []struct{ job, filtered, exhausted string }{
		{"model", "missing devices", ""},
		{"eight", "missing devices", ""},
		{"fill", "", recText},
	} {
		evals, _, err := c.Jobs().Evaluations(tc.job, nil)
		if err != nil {
			t.Fatal(err)
		}
		var m *api.AllocationMetric
		for _, e := range evals {
			if e.Status == "blocked" {
				m = e.FailedTGAllocs["workers"]
			}
		}
		if m == nil {
			t.Fatalf("%s: no blocked evaluation", tc.job)
		}
		got := strings.Join(keys(m.ConstraintFiltered), ",") + "|" + strings.Join(keys(m.DimensionExhausted), ",")
		if want := tc.filtered + "|" + tc.exhausted; got != want {
			t.Errorf("%s: filtered|exhausted = %q, want %q", tc.job, got, want)
		}
	}
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSigtermCompletesWithoutReplacement: a signalled worker leaves and
// exits 0; the batch allocation is complete and not replaced.
func TestSigtermCompletesWithoutReplacement(t *testing.T) {
	s := New(t, Config{})
	c := s.Client()
	if _, _, err := c.Jobs().Register(batchJob("g", 2, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	a, _, err := c.Allocations().Info(s.Allocations("default", "g")[1].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Allocations().Signal(a, nil, "worker", "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	all := s.Allocations("default", "g")
	if len(all) != 2 || all[1].ClientStatus != "complete" || all[1].DesiredStatus != "run" {
		t.Errorf("after SIGTERM: %d allocations, [1] %s/%s; want 2, run/complete", len(all), all[1].DesiredStatus, all[1].ClientStatus)
	}
	if got := s.Signals(a.ID); !cmp.Equal(got, []string{"SIGTERM"}) {
		t.Errorf("signals = %v", got)
	}
}
