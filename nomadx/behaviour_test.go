package nomadx_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/nomadx/nomadtest"
	"github.com/edl-nomad/edl/planner"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// These tests run against nomadtest with asynchronous placement (its
// default, as Nomad behaves).

func settle(t *testing.T, s *nomadtest.Server) {
	t.Helper()
	if !s.Settle(5 * time.Second) {
		t.Fatal("nomadtest did not settle")
	}
}

// miniLoop is one planner round as planner/loop does it: Capacity, every
// job's Workers, Decide, then Scale where the loop would.
type miniLoop struct {
	c      *nomadx.Cluster
	jobs   []jobs.Job
	target map[string]int
	// drains applies planner.PlanDrain the way docs/nomad.md tells the
	// loop to.
	drains  bool
	reasons []string
}

func (m *miniLoop) round(t *testing.T) planner.Plan {
	t.Helper()
	ctx := context.Background()
	capy, err := m.c.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := planner.DefaultConfig()
	cfg.Cooldown = 0
	snap := planner.Snapshot{Capacity: capy, Config: cfg}
	live := map[string]int{}
	all := map[string][]jobs.Worker{}
	for _, j := range m.jobs {
		ws, err := m.c.Workers(ctx, j.ID)
		all[j.ID] = ws
		if err != nil {
			t.Fatal(err)
		}
		place := map[string]int{}
		for _, w := range ws {
			if w.State == jobs.WorkerPending || w.State == jobs.WorkerRunning {
				live[j.ID]++
				place[w.Node]++
			}
		}
		snap.Jobs = append(snap.Jobs, planner.JobState{ID: j.ID, Tenant: j.Tenant, Min: j.Spec.Workers.Min, Max: j.Spec.Workers.Max,
			GPUsPerWorker: j.Spec.GPUsPerWorker, Priority: j.Spec.Priority, SubmittedAt: j.CreatedAt,
			Current: live[j.ID], Placement: place})
	}
	plan := planner.Decide(snap, time.Now())
	for _, j := range m.jobs {
		tg, _ := plan.Target(j.ID)
		if tg.Workers == 0 && m.target[j.ID] == 0 && live[j.ID] == 0 {
			continue
		}
		count := tg.Workers
		if m.drains {
			dp := planner.PlanDrain(tg, all[j.ID])
			if dp.Reason != "" {
				tg.Reason = dp.Reason
				m.reasons = append(m.reasons, dp.Reason)
			}
			count = dp.Count
			for _, id := range dp.Remove {
				if err := m.c.StopWorker(ctx, j.ID, id, "node drains"); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := m.c.Scale(ctx, j, count, tg.Reason); err != nil {
			t.Fatal(err)
		}
		m.target[j.ID] = tg.Workers
	}
	return plan
}

// counts returns the count of every register and scale request per Nomad
// job, in order.
func counts(t *testing.T, s *nomadtest.Server) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, r := range s.Requests() {
		switch {
		case r.Method == "PUT" && r.Path == "/v1/jobs":
			var req api.JobRegisterRequest
			if err := json.Unmarshal(r.Body, &req); err != nil {
				t.Fatal(err)
			}
			out[*req.Job.ID] = append(out[*req.Job.ID], *req.Job.TaskGroups[0].Count)
		case r.Method == "PUT" && len(r.Path) > len("/scale") && r.Path[len(r.Path)-len("/scale"):] == "/scale":
			var req api.ScalingRequest
			if err := json.Unmarshal(r.Body, &req); err != nil {
				t.Fatal(err)
			}
			id := r.Path[len("/v1/job/") : len(r.Path)-len("/scale")]
			out[id] = append(out[id], int(*req.Count))
		}
	}
	return out
}

// TestNoFlapAtStart (defect 1): job a holds all 4 GPUs; b arrives and the
// planner shrinks a to make room. a's stopping workers stay client-running
// for a while (their GPUs already Nomad's to give away) and b's placement
// is asynchronous. Rounds every 10 ms must not suspend b in between: b is
// registered once at its target and never scaled.
func TestNoFlapAtStart(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "n", GPUs: 4}}, ExitDelay: 300 * time.Millisecond}, nil)
	a := gpuJob("a", 1, nil)
	a.CreatedAt = time.Now().Add(-time.Hour)
	m := &miniLoop{c: e.c, jobs: []jobs.Job{a}, target: map[string]int{}}
	m.round(t)
	settle(t, e.srv)
	b := gpuJob("b", 1, nil)
	b.Spec.Workers = jobs.WorkerRange{Min: 2, Max: 2}
	b.CreatedAt = time.Now()
	// b's evaluation runs first and blocks (a still holds every GPU); a's
	// shrink frees two GPUs, and b is placed by a later scheduler pass.
	m.jobs = append([]jobs.Job{b}, m.jobs...)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m.round(t)
	}
	got := counts(t, e.srv)
	if len(got["edl-b"]) == 0 {
		t.Fatalf("b never started: %v (the policy did not make room; the test needs it to)", got)
	}
	t.Logf("counts %v", got)
	want := map[string][]int{"edl-a": {4, 2}, "edl-b": {2}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("register/scale counts per job (-want +got):\n%s", d)
	}
}

// TestStoppingAllocationsFreeTheirGPUs (defect 1): Capacity counts a
// stopping allocation's GPUs as free, as Nomad's scheduler does, and
// Workers reports it stopping.
func TestStoppingAllocationsFreeTheirGPUs(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "n", GPUs: 4}}, ExitDelay: time.Hour}, nil)
	ctx := context.Background()
	job := gpuJob("s", 1, nil)
	if err := e.c.Scale(ctx, job, 4, "start"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	if err := e.c.Scale(ctx, job, 1, "shrink"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		stopping := 0
		for _, a := range e.srv.Allocations("default", "edl-s") {
			if a.DesiredStatus == "stop" {
				stopping++
			}
		}
		if stopping == 3 {
			break
		}
	}
	capy, err := e.c.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if capy.Nodes[0].FreeGPUs != 3 {
		t.Errorf("free GPUs = %d, want 3 (stopping allocations hold none)", capy.Nodes[0].FreeGPUs)
	}
	ws, _ := e.c.Workers(ctx, "s")
	var states []string
	for _, w := range ws {
		states = append(states, fmt.Sprintf("%d %s %s/%s", w.Index, w.State, w.DesiredStatus, w.ClientStatus))
	}
	want := []string{"0 running run/running", "1 stopping stop/running", "2 stopping stop/running", "3 stopping stop/running"}
	if d := cmp.Diff(want, states); d != "" {
		t.Errorf("workers (-want +got):\n%s", d)
	}
}

// TestWorkersCountQueuedAndUnplaced (defect 1): right after a scale the
// allocations do not exist yet, and one that does not fit waits in a
// blocked evaluation; Workers reports both as pending (Queued).
func TestWorkersCountQueuedAndUnplaced(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "n", GPUs: 2}}}, nil)
	ctx := context.Background()
	job := gpuJob("q", 1, nil)
	if err := e.c.Scale(ctx, job, 3, "start"); err != nil {
		t.Fatal(err)
	}
	summary := func() []string {
		ws, err := e.c.Workers(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%d %s queued=%v", w.Index, w.State, w.Queued))
		}
		return out
	}
	if d := cmp.Diff([]string{"0 pending queued=true", "1 pending queued=true", "2 pending queued=true"}, summary()); d != "" {
		t.Errorf("right after the register (-want +got):\n%s", d)
	}
	settle(t, e.srv)
	if d := cmp.Diff([]string{"0 running queued=false", "1 running queued=false", "2 pending queued=true"}, summary()); d != "" {
		t.Errorf("placed, one blocked (-want +got):\n%s", d)
	}
}

// TestRequestsPerRoundIndependentOfJobs (defect 2): a round over N
// running jobs costs three requests (nodes, allocations, jobs), whatever N.
func TestRequestsPerRoundIndependentOfJobs(t *testing.T) {
	for _, n := range []int{1, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := newEnv(t, nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "n", GPUs: 64, CPUShares: 100000, MemoryMB: 1 << 20}}}, nil)
			m := &miniLoop{c: e.c, target: map[string]int{}}
			for i := range n {
				j := gpuJob(fmt.Sprintf("r%d", i), 1, nil)
				j.Spec.Workers = jobs.WorkerRange{Min: 2, Max: 2}
				m.jobs = append(m.jobs, j)
			}
			m.round(t) // registers
			settle(t, e.srv)
			m.round(t) // adopts: first sight of each job after its write
			e.srv.ResetRequests()
			m.round(t)
			var paths []string
			for _, r := range e.srv.Requests() {
				paths = append(paths, r.Method+" "+r.Path)
			}
			want := []string{"GET /v1/nodes", "GET /v1/allocations", "GET /v1/jobs"}
			if d := cmp.Diff(want, paths); d != "" {
				t.Errorf("requests of a steady round over %d jobs (-want +got):\n%s", n, d)
			}
		})
	}
}

// TestStoppedJobReRegisteredOnceAtTarget (defect 3): a job stopped with
// `nomad job stop` is registered again once, at the target; a target of 0
// leaves it stopped.
func TestStoppedJobReRegisteredOnceAtTarget(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	ctx := context.Background()
	job := gpuJob("x", 1, nil)
	if err := e.c.Scale(ctx, job, 2, "start"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	if _, _, err := e.srv.Client().Jobs().Deregister("edl-x", false, nil); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	if _, err := e.c.Capacity(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Scale(ctx, job, 0, "nothing fits"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Scale(ctx, job, 2, "start again"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	if d := cmp.Diff(map[string][]int{"edl-x": {2, 2}}, counts(t, e.srv)); d != "" {
		t.Errorf("register/scale counts (-want +got):\n%s", d)
	}
}

// TestStopWorkerRemovesChosenWorker: removing worker 1 of 3 makes it exit
// 0 (SIGTERM), then lowers the count to 2: Nomad stops no other worker and
// places nothing for index 1; a later scale-up reuses index 1.
func TestStopWorkerRemovesChosenWorker(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	ctx := context.Background()
	job := gpuJob("w", 1, nil)
	if err := e.c.Scale(ctx, job, 3, "start"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	ws, _ := e.c.Workers(ctx, "w")
	chosen := ws[1]
	for range 2 { // a second call while it leaves is a no-op
		if err := e.c.StopWorker(ctx, "w", chosen.ID, "straggler"); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.srv.Signals(chosen.ID); !cmp.Equal(got, []string{"SIGTERM"}) {
		t.Errorf("signals = %v, want one SIGTERM", got)
	}
	settle(t, e.srv)
	if _, err := e.c.Capacity(ctx); err != nil { // notices the exit, lowers the count
		t.Fatal(err)
	}
	if err := e.c.StopWorker(ctx, "w", chosen.ID, "again"); err != nil { // already released: no-op
		t.Fatal(err)
	}
	settle(t, e.srv)
	state := func() []string {
		var out []string
		for _, a := range e.srv.Allocations("default", "edl-w") {
			out = append(out, fmt.Sprintf("%s %s/%s", a.Name, a.DesiredStatus, a.ClientStatus))
		}
		sort.Strings(out)
		return out
	}
	want := []string{"edl-w.workers[0] run/running", "edl-w.workers[1] run/complete", "edl-w.workers[2] run/running"}
	if d := cmp.Diff(want, state()); d != "" {
		t.Errorf("allocations after the removal (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string][]int{"edl-w": {3, 2}}, counts(t, e.srv)); d != "" {
		t.Errorf("register/scale counts (-want +got):\n%s", d)
	}
	if err := e.c.Scale(ctx, job, 3, "grow"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	want = []string{"edl-w.workers[0] run/running", "edl-w.workers[1] run/complete", "edl-w.workers[1] run/running", "edl-w.workers[2] run/running"}
	if d := cmp.Diff(want, state()); d != "" {
		t.Errorf("after growing back (-want +got):\n%s", d)
	}
}

// TestDrainingNodeIsVisible: Capacity leaves a draining node out (never
// null when every node drains) and Workers flags the workers on it.
func TestDrainingNodeIsVisible(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "n1", GPUs: 2}}}, nil)
	ctx := context.Background()
	if err := e.c.Scale(ctx, gpuJob("d", 1, nil), 2, "start"); err != nil {
		t.Fatal(err)
	}
	settle(t, e.srv)
	if err := e.srv.Drain("n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	capy, err := e.c.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(capy)
	if string(b) != `{"nodes":[]}` {
		t.Errorf("capacity = %s, want no nodes (not null)", b)
	}
	ws, _ := e.c.Workers(ctx, "d")
	for _, w := range ws {
		if !w.Draining || w.State != jobs.WorkerRunning {
			t.Errorf("worker %d: draining=%v %s, want draining and running", w.Index, w.Draining, w.State)
		}
	}
}

// TestWatchWakesOnChanges (defect 2): Watch holds blocking queries and
// calls back on a placement, an exit and a drain, without polling.
func TestWatchWakesOnChanges(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "n1", GPUs: 2}}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	wakes := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		e.c.Watch(ctx, 10*time.Second, func() { wakes <- struct{}{} })
		close(done)
	}()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // both queries are waiting
	idle := len(e.srv.Requests())
	time.Sleep(200 * time.Millisecond)
	if n := len(e.srv.Requests()); n != idle {
		t.Errorf("%d requests while nothing changed, want none (blocking queries)", n-idle)
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(2 * time.Second):
			t.Fatalf("no wake after %s", what)
		}
		for len(wakes) > 0 {
			<-wakes
		}
	}
	if err := e.c.Scale(context.Background(), gpuJob("w", 1, nil), 1, "start"); err != nil {
		t.Fatal(err)
	}
	wait("a register")
	settle(t, e.srv)
	for len(wakes) > 0 {
		<-wakes
	}
	if err := e.srv.Drain("n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	wait("a drain")
}

// TestDrainMovesWorkersStopFree: a node drains with a
// long deadline; the planner grows the job on the other node first, then
// the drained workers leave gracefully (exit 0, no Nomad stop), and the
// job ends at its target on the other node without ever shrinking.
func TestDrainMovesWorkersStopFree(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "n1", GPUs: 2, UniqueGPUIDs: true}, {Name: "n2", GPUs: 2, UniqueGPUIDs: true}}}, nil)
	j := gpuJob("m", 1, nil)
	j.Spec.Workers = jobs.WorkerRange{Min: 2, Max: 2}
	m := &miniLoop{c: e.c, jobs: []jobs.Job{j}, target: map[string]int{}, drains: true}
	m.round(t)
	settle(t, e.srv)
	if err := e.srv.Drain("n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	minRunning := 2
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m.round(t)
		running, moved := 0, 0
		for _, a := range e.srv.Allocations("default", "edl-m") {
			if a.ClientStatus == "running" && a.DesiredStatus == "run" {
				running++
				if a.NodeName == "n2" {
					moved++
				}
			}
		}
		minRunning = min(minRunning, running)
		if moved == 2 && running == 2 {
			m.round(t) // one more: nothing left to do
			break
		}
	}
	settle(t, e.srv)
	var got []string
	for _, a := range e.srv.Allocations("default", "edl-m") {
		got = append(got, fmt.Sprintf("%s %s/%s", a.NodeName, a.DesiredStatus, a.ClientStatus))
	}
	sort.Strings(got)
	want := []string{"n1 run/complete", "n1 run/complete", "n2 run/running", "n2 run/running"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("allocations after the drain (-want +got):\n%s", d)
	}
	if minRunning < 2 {
		t.Errorf("running workers fell to %d during the move, want never below 2", minRunning)
	}
	if d := cmp.Diff(map[string][]int{"edl-m": {2, 4, 3, 2}}, counts(t, e.srv)); d != "" {
		t.Errorf("register/scale counts (-want +got):\n%s", d)
	}
	if len(m.reasons) == 0 || !strings.Contains(m.reasons[0], "move off draining node") {
		t.Errorf("reasons = %q", m.reasons)
	}
}
