package nomadx_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/nomadx/nomadtest"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// The planner's Cluster interface, as the planner declares it.
var _ interface {
	Capacity(ctx context.Context) (jobs.Capacity, error)
	Workers(ctx context.Context, jobID string) ([]jobs.Worker, error)
	Scale(ctx context.Context, job jobs.Job, count int, reason string) error
	StopWorker(ctx context.Context, jobID, workerID, reason string) error
	Teardown(ctx context.Context, jobID string) error
} = (*nomadx.Cluster)(nil)

func testConfig(addr string) nomadx.Config {
	cfg := nomadx.DefaultConfig()
	cfg.Address = addr
	cfg.RedisURL = "redis://10.0.0.5:6379/0"
	cfg.StoreURL = "s3://ckpt/edl"
	cfg.Command = "/usr/local/bin/edl"
	cfg.CPUMHz, cfg.MemoryMiB = 500, 1024
	cfg.Retry.BaseDelay, cfg.Retry.MaxDelay = time.Millisecond, 5*time.Millisecond
	cfg.Retry.Timeout = 2 * time.Second
	return cfg
}

type env struct {
	srv *nomadtest.Server
	c   *nomadx.Cluster
	cfg nomadx.Config
}

func newEnv(t *testing.T, sc nomadtest.Config, mut func(*nomadx.Config)) env {
	t.Helper()
	srv := nomadtest.New(t, sc)
	cfg := testConfig(srv.URL())
	if mut != nil {
		mut(&cfg)
	}
	c, err := nomadx.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return env{srv, c, cfg}
}

func gpuJob(id string, gpus int, gc *jobs.GPUConstraint) jobs.Job {
	return jobs.Job{ID: id, Tenant: "team-a", Spec: jobs.Spec{
		Name: id, Workers: jobs.WorkerRange{Min: 1, Max: 4}, GPUsPerWorker: gpus, GPU: gc,
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin},
	}}
}

// requests filters the recorded requests.
func requests(s *nomadtest.Server, method, pathPrefix string) []nomadtest.Request {
	var out []nomadtest.Request
	for _, r := range s.Requests() {
		if r.Method == method && strings.HasPrefix(r.Path, pathPrefix) {
			out = append(out, r)
		}
	}
	return out
}

func TestScaleRegistersTheJobTemplate(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true, Nodes: []nomadtest.NodeSpec{{Name: "gpu-1", GPUs: 4, Model: "H200", MemoryMiB: 143771}}}, nil)
	ctx := context.Background()
	job := gpuJob("j1", 1, &jobs.GPUConstraint{Model: "H200", MinMemoryMiB: 80 * 1024})
	if err := e.c.Scale(ctx, job, 2, "initial"); err != nil {
		t.Fatal(err)
	}
	regs := requests(e.srv, "PUT", "/v1/jobs")
	if len(regs) != 1 {
		t.Fatalf("register requests = %d, want 1", len(regs))
	}
	// The raw JSON: no update block anywhere, batch, the device block.
	var raw map[string]any
	if err := json.Unmarshal(regs[0].Body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["EnforceIndex"] != true {
		t.Errorf("EnforceIndex = %v, want true (never overwrite a job that appeared meanwhile)", raw["EnforceIndex"])
	}
	rj := raw["Job"].(map[string]any)
	tg := rj["TaskGroups"].([]any)[0].(map[string]any)
	if rj["Update"] != nil || tg["Update"] != nil {
		t.Errorf("update block sent: job %v group %v", rj["Update"], tg["Update"])
	}
	var req api.JobRegisterRequest
	if err := json.Unmarshal(regs[0].Body, &req); err != nil {
		t.Fatal(err)
	}
	j := req.Job
	task := j.TaskGroups[0].Tasks[0]
	got := map[string]any{
		"id": *j.ID, "type": *j.Type, "datacenters": j.Datacenters, "meta": j.Meta,
		"group": *j.TaskGroups[0].Name, "count": *j.TaskGroups[0].Count,
		"restart":    []any{*j.TaskGroups[0].RestartPolicy.Attempts, *j.TaskGroups[0].RestartPolicy.Mode},
		"reschedule": []any{*j.TaskGroups[0].ReschedulePolicy.Attempts, *j.TaskGroups[0].ReschedulePolicy.Unlimited},
		"task":       task.Name, "driver": task.Driver, "kill_signal": task.KillSignal, "kill_timeout": *task.KillTimeout,
		"config": task.Config, "cpu": *task.Resources.CPU, "memory": *task.Resources.MemoryMB,
		"device": task.Resources.Devices,
	}
	want := map[string]any{
		"id": "edl-j1", "type": "batch", "datacenters": []string{"dc1"},
		"meta":  map[string]string{"edl_job_id": "j1", "edl_tenant": "team-a"},
		"group": "workers", "count": 2,
		"restart": []any{1, "fail"}, "reschedule": []any{2, false},
		"task": "worker", "driver": "exec", "kill_signal": "SIGTERM", "kill_timeout": 30 * time.Second,
		"config": map[string]any{"command": "/usr/local/bin/edl", "args": []any{"worker", "--job", "j1",
			"--redis", "redis://10.0.0.5:6379/0", "--store", "s3://ckpt/edl"}},
		"cpu": 500, "memory": 1024,
		"device": []*api.RequestedDevice{{Name: "nvidia/gpu", Count: ptr(uint64(1)), Constraints: []*api.Constraint{
			{LTarget: "${device.attr.memory}", Operand: ">=", RTarget: "81920 MiB"},
			{LTarget: "${device.model}", Operand: "=", RTarget: "H200"},
		}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("registered job (-want +got):\n%s", d)
	}
	// Nomad placed both workers, each on its own GPU.
	ws, err := e.c.Workers(ctx, "j1")
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, w := range ws {
		summary = append(summary, strings.Join(append([]string{string(w.State)}, w.GPUs...), " "))
	}
	if d := cmp.Diff([]string{"running gpu0", "running gpu1"}, summary); d != "" || ws[0].Index != 0 || ws[1].Index != 1 {
		t.Errorf("workers (-want +got):\n%s\n%+v", d, ws)
	}
}

func ptr[T any](v T) *T { return &v }

func TestScaleCallsAreIdempotentAndNamed(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true}, nil)
	ctx := context.Background()
	job := gpuJob("j2", 1, nil)
	for _, n := range []int{2, 2, 3, 3, 1} {
		if err := e.c.Scale(ctx, job, n, "planner: round"); err != nil {
			t.Fatalf("scale %d: %v", n, err)
		}
	}
	if n := len(requests(e.srv, "PUT", "/v1/jobs")); n != 1 {
		t.Errorf("registers = %d, want 1", n)
	}
	scales := requests(e.srv, "PUT", "/v1/job/edl-j2/scale")
	if len(scales) != 2 {
		t.Fatalf("scale requests = %d, want 2 (2->3, 3->1; repeats send nothing)", len(scales))
	}
	var sr api.ScalingRequest
	if err := json.Unmarshal(scales[1].Body, &sr); err != nil {
		t.Fatal(err)
	}
	if *sr.Count != 1 || sr.Target["Group"] != "workers" || sr.Message != "planner: round" ||
		sr.Meta["edl_job_id"] != "j2" || sr.Meta["reason"] != "planner: round" {
		t.Errorf("scale request = %+v", sr)
	}
	// Scale-in stopped the highest indexes.
	ws, _ := e.c.Workers(ctx, "j2")
	live := 0
	for _, w := range ws {
		if w.State.Live() {
			live++
			if w.Index != 0 {
				t.Errorf("live worker index %d after scale to 1, want 0", w.Index)
			}
		}
	}
	if live != 1 {
		t.Errorf("live workers = %d, want 1: %+v", live, ws)
	}
}

func TestScaleAdoptsExistingJobAndRefusesForeignOne(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true}, nil)
	ctx := context.Background()
	job := gpuJob("j3", 1, nil)
	// A previous edl serve registered the job.
	if _, _, err := e.srv.Client().Jobs().Register(nomadx.JobTemplate(e.cfg, job, 1), nil); err != nil {
		t.Fatal(err)
	}
	e.srv.ResetRequests()
	if err := e.c.Scale(ctx, job, 3, "adopted"); err != nil {
		t.Fatal(err)
	}
	if n := len(requests(e.srv, "PUT", "/v1/jobs")); n != 0 {
		t.Errorf("re-registered an existing job (%d registers); want adoption", n)
	}
	if n := len(requests(e.srv, "PUT", "/v1/job/edl-j3/scale")); n != 1 {
		t.Errorf("scale requests = %d, want 1", n)
	}
	// Someone else's job under the derived ID is left alone.
	foreign := nomadx.JobTemplate(e.cfg, gpuJob("j4", 1, nil), 1)
	foreign.Meta = nil
	if _, _, err := e.srv.Client().Jobs().Register(foreign, nil); err != nil {
		t.Fatal(err)
	}
	err := e.c.Scale(ctx, gpuJob("j4", 1, nil), 2, "x")
	if !errors.Is(err, nomadx.ErrNotOurs) {
		t.Errorf("scale of a foreign job: %v, want ErrNotOurs", err)
	}
	if err := e.c.Teardown(ctx, "j4"); !errors.Is(err, nomadx.ErrNotOurs) {
		t.Errorf("teardown of a foreign job: %v, want ErrNotOurs", err)
	}
}

func TestConcurrentScaleRegistersOnce(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true}, nil)
	job := gpuJob("j5", 1, nil)
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- e.c.Scale(context.Background(), job, 2, "race") }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	nj := e.srv.Job("default", "edl-j5")
	if nj == nil || *nj.Version != 0 || *nj.TaskGroups[0].Count != 2 {
		t.Fatalf("job after racing scales: %+v", nj)
	}
}

func TestCapacitySubtractsLiveDevices(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true, Nodes: []nomadtest.NodeSpec{
		{Name: "a", GPUs: 4, Model: "H200", MemoryMiB: 143771, UniqueGPUIDs: true, CPUShares: 8000, MemoryMB: 16384},
		{Name: "b", GPUs: 8, Model: "A100", MemoryMiB: 81920, UniqueGPUIDs: true, Drain: true},
		{Name: "c", GPUs: 2, UnhealthyGPUs: 1, Model: "L4", MemoryMiB: 23034, UniqueGPUIDs: true, Ineligible: true},
		{Name: "d", CPUShares: 4000, MemoryMB: 8192},
	}}, nil)
	ctx := context.Background()
	if err := e.c.Scale(ctx, gpuJob("j7", 2, &jobs.GPUConstraint{Model: "H200"}), 1, "start"); err != nil {
		t.Fatal(err)
	}
	cp, err := e.c.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cp.Nodes {
		cp.Nodes[i].ID = ""
	}
	want := []jobs.Node{
		// 8000 MHz, 16384 MB; one worker holds 500 MHz, 1024 MiB and 2 GPUs.
		{Name: "a", Class: jobs.GPUClass{Model: "H200", MemoryMiB: 143771}, GPUs: 4, FreeGPUs: 2, CPUSlots: 16, FreeCPUSlots: 15},
		{Name: "d", CPUSlots: 8, FreeCPUSlots: 8},
	}
	if d := cmp.Diff(want, cp.Nodes); d != "" {
		t.Errorf("capacity (-want +got):\n%s", d)
	}
	// Teardown frees the devices; a second teardown is fine.
	for range 2 {
		if err := e.c.Teardown(ctx, "j7"); err != nil {
			t.Fatal(err)
		}
	}
	cp, _ = e.c.Capacity(ctx)
	if cp.Nodes[0].FreeGPUs != 4 {
		t.Errorf("free GPUs after teardown = %d, want 4", cp.Nodes[0].FreeGPUs)
	}
	if e.srv.Job("default", "edl-j7") != nil {
		t.Error("job still registered after teardown (purge)")
	}
}

// TestCapacityCountsForeignAllocations: another team's Nomad job on the
// shared cluster holds GPUs that are neither free nor edl's (ForeignGPUs);
// once it is gone they are free at the next read.
func TestCapacityCountsForeignAllocations(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true, Nodes: []nomadtest.NodeSpec{
		{Name: "a", GPUs: 4, Model: "H200", MemoryMiB: 143771, UniqueGPUIDs: true, CPUShares: 8000, MemoryMB: 16384},
	}}, nil)
	ctx := context.Background()
	other := nomadx.JobTemplate(e.cfg, gpuJob("x", 3, nil), 1)
	other.ID, other.Name, other.Meta = ptr("train-fx"), ptr("train-fx"), nil
	if _, _, err := e.srv.Client().Jobs().Register(other, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Scale(ctx, gpuJob("j7", 1, nil), 1, "start"); err != nil {
		t.Fatal(err)
	}
	cp, err := e.c.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := cp.Nodes[0]; n.GPUs != 4 || n.FreeGPUs != 0 || n.ForeignGPUs != 3 || n.UsableGPUs() != 1 {
		t.Errorf("with train-fx on 3 GPUs and edl-j7 on 1: %+v, want 4 GPUs, 0 free, 3 foreign (1 usable)", n)
	}
	if _, _, err := e.srv.Client().Jobs().Deregister("train-fx", true, nil); err != nil {
		t.Fatal(err)
	}
	e.srv.Settle(5 * time.Second)
	cp, _ = e.c.Capacity(ctx)
	if n := cp.Nodes[0]; n.FreeGPUs != 3 || n.ForeignGPUs != 0 || n.UsableGPUs() != 4 {
		t.Errorf("after train-fx stopped: %+v, want 3 free, 0 foreign (4 usable)", n)
	}
}

func TestRetriesServerErrorsThenSucceeds(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true}, nil)
	e.srv.AddFault(nomadtest.Fault{Method: "PUT", PathPrefix: "/v1/jobs", Status: 503, Body: "No cluster leader", Times: 2})
	if err := e.c.Scale(context.Background(), gpuJob("j8", 1, nil), 1, "start"); err != nil {
		t.Fatal(err)
	}
	if n := len(requests(e.srv, "PUT", "/v1/jobs")); n != 3 {
		t.Errorf("register tries = %d, want 3", n)
	}
	// Every try re-reads the job first.
	if n := len(requests(e.srv, "GET", "/v1/job/edl-j8")); n != 3 {
		t.Errorf("reads = %d, want 3", n)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	cases := []struct {
		name   string
		fault  nomadtest.Fault
		status int
		client bool
		tries  int
	}{
		{"4xx is not retried", nomadtest.Fault{Method: "PUT", Status: 400, Body: "bad request", Times: 10}, 400, true, 1},
		{"403 is not retried", nomadtest.Fault{Method: "PUT", Status: 403, Body: "Permission denied", Times: 10}, 403, true, 1},
		{"5xx gives up after Attempts", nomadtest.Fault{Method: "PUT", Status: 500, Body: "rpc error: eval broker disabled", Times: 10}, 500, false, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nomadtest.Config{Sync: true}, func(c *nomadx.Config) { c.Retry.Attempts = 3 })
			e.srv.AddFault(tc.fault)
			err := e.c.Scale(context.Background(), gpuJob("j9", 1, nil), 1, "start")
			var nerr *nomadx.Error
			if !errors.As(err, &nerr) {
				t.Fatalf("error %v (%T), want *nomadx.Error", err, err)
			}
			if nerr.Status != tc.status || nerr.Client() != tc.client || nerr.Message != tc.fault.Body || nerr.NomadJob != "edl-j9" {
				t.Errorf("error = %+v", nerr)
			}
			if n := len(requests(e.srv, "PUT", "/v1/jobs")); n != tc.tries {
				t.Errorf("tries = %d, want %d", n, tc.tries)
			}
		})
	}
}

func TestTimeoutIsRetried(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true}, func(c *nomadx.Config) { c.Retry.Timeout = 100 * time.Millisecond })
	e.srv.AddFault(nomadtest.Fault{Method: "GET", PathPrefix: "/v1/nodes", Delay: time.Second})
	cp, err := e.c.Capacity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Nodes) != 1 || cp.Nodes[0].GPUs != 4 {
		t.Errorf("capacity = %+v", cp)
	}
	if n := len(requests(e.srv, "GET", "/v1/nodes")); n != 2 {
		t.Errorf("node list tries = %d, want 2", n)
	}
	// A cancelled context stops retrying at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.c.Capacity(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestFailedWorkerIsReplacedByNextScale(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true}, nil)
	ctx := context.Background()
	job := gpuJob("j10", 1, nil)
	if err := e.c.Scale(ctx, job, 2, "start"); err != nil {
		t.Fatal(err)
	}
	// Worker 1 fails three times: two reschedules, then Nomad gives up.
	for range 3 {
		ws, _ := e.c.Workers(ctx, "j10")
		for _, w := range ws {
			if w.Index == 1 && w.State.Live() {
				if err := e.srv.MarkFailed(w.ID, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	live := func() int {
		ws, _ := e.c.Workers(ctx, "j10")
		n := 0
		for _, w := range ws {
			if w.State.Live() {
				n++
			}
		}
		return n
	}
	if n := live(); n != 1 {
		t.Fatalf("live workers after 3 failures = %d, want 1", n)
	}
	if err := e.c.Scale(ctx, job, 2, "keep 2"); err != nil {
		t.Fatal(err)
	}
	if n := live(); n != 2 {
		t.Errorf("live workers after re-scale = %d, want 2", n)
	}
	scales := requests(e.srv, "PUT", "/v1/job/edl-j10/scale")
	if len(scales) != 1 || !strings.Contains(string(scales[0].Body), "replace 1 failed worker") {
		t.Errorf("scale requests: %d %v", len(scales), scales)
	}
}

func TestACLTokenAndNamespace(t *testing.T) {
	e := newEnv(t, nomadtest.Config{Sync: true, Token: "s3cret"}, func(c *nomadx.Config) {
		c.Token = "s3cret"
		c.Namespace = "ml"
		c.Region = "eu"
	})
	if err := e.c.Scale(context.Background(), gpuJob("j11", 1, nil), 1, "start"); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.srv.Requests() {
		if r.Token != "s3cret" || !strings.Contains(r.Query, "namespace=ml") || !strings.Contains(r.Query, "region=eu") {
			t.Errorf("request %s %s?%s token %q", r.Method, r.Path, r.Query, r.Token)
		}
	}
	if e.srv.Job("ml", "edl-j11") == nil {
		t.Error("job not registered in namespace ml")
	}
	bad := newEnv(t, nomadtest.Config{Sync: true, Token: "s3cret"}, func(c *nomadx.Config) { c.Token = "wrong" })
	var nerr *nomadx.Error
	if err := bad.c.Scale(context.Background(), gpuJob("j12", 1, nil), 1, "x"); !errors.As(err, &nerr) || nerr.Status != http.StatusForbidden {
		t.Errorf("wrong token: %v", err)
	}
}
