package api_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

// scrape reads /metrics (as an admin: every series) into "name{labels}" ->
// value, as the text format writes them (labels in name order).
func scrape(t *testing.T, e *env) map[string]float64 {
	t.Helper()
	r := e.get("/metrics", tokAdmin)
	if r.code != 200 {
		t.Fatalf("/metrics: %d", r.code)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(r.body), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// TestGPUMetricsSplitForeign: GPUs that other Nomad jobs hold are their
// own state, not edl's held ones; the states add up to the cluster's GPUs.
func TestGPUMetricsSplitForeign(t *testing.T) {
	e := newEnvCluster(t, testenv.NewRedis(t), api.Config{}, fakeCluster{capa: jobs.Capacity{Nodes: []jobs.Node{
		{ID: "n1", Name: "node-1", GPUs: 8, FreeGPUs: 2, ForeignGPUs: 4},
		{ID: "n2", Name: "node-2", GPUs: 4, FreeGPUs: 1},
	}}})
	m := scrape(t, e)
	for k, v := range map[string]float64{`edl_gpus{state="free"}`: 3, `edl_gpus{state="held"}`: 5, `edl_gpus{state="foreign"}`: 4} {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
}

func TestJobMetrics(t *testing.T) {
	r := testenv.NewRedis(t)
	rounds := int64(0)
	e := newEnvWith(t, r, api.Config{PlannerRounds: func() int64 { return rounds }})
	ctx := context.Background()
	a := e.submit(tokA, specWith(t, map[string]any{"gpus_per_worker": 1})).job(t)
	b := e.submit(tokB, exampleJob(t)).job(t)
	e.submit(tokB, exampleJob(t))

	// a: running on 2 of 3 workers, training, checkpointed a minute ago
	if _, err := e.store.Transition(ctx, a.ID, jobs.Starting, "placed"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Transition(ctx, a.ID, jobs.Running, "training"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetWorkers(ctx, a.ID, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetProgress(ctx, a.ID, jobs.Progress{Step: 420, Loss: 0.25, SamplesPerS: 1234.5, WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetCheckpoint(ctx, a.ID, jobs.CheckpointRef{Step: 400, CreatedAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	events := []jobs.Event{
		{Type: jobs.EventScale, Message: "grow", Data: map[string]any{"from": 1, "to": 2}},
		{Type: jobs.EventScale, Message: "grow", Data: map[string]any{"from": 2, "to": 3}},
		{Type: jobs.EventScale, Message: "shrink", Data: map[string]any{"from": 3, "to": 2}},
		{Type: jobs.EventScale, Message: "pinned to 2 workers by the tenant", Data: map[string]any{"by": "tenant", "pinned": 2}},
		{Type: jobs.EventWorker, Message: "straggler replaced", Data: map[string]any{"worker": "w1", "step_ms": 90.0, "median_ms": 30.0}},
		{Type: jobs.EventWorker, Message: "worker w2 died", Data: map[string]any{"worker": "w2", "failed": true}},
		{Type: jobs.EventWorker, Message: "switch", Data: map[string]any{"worker": "w0", "stall_ms": 350.0}},
		{Type: jobs.EventCheckpoint, Message: "skipped", Data: map[string]any{"step": 500, "skipped": true}},
		{Type: jobs.EventCheckpoint, Message: "retrying", Data: map[string]any{"step": 500, "attempt": 1}},
		{Type: jobs.EventError, Message: "checkpoint at step 600 failed", Data: map[string]any{"step": 600}},
		{Type: jobs.EventError, Message: "callback failed"}, // neither a resize nor a checkpoint
	}
	for _, ev := range events {
		if _, err := e.store.AppendEvent(ctx, a.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	rounds = 7

	m := scrape(t, e)
	want := map[string]float64{
		`edl_jobs{state="running",tenant="team-a"}`:                          1,
		`edl_jobs{state="pending",tenant="team-b"}`:                          2,
		`edl_job_workers{job="` + a.ID + `",kind="current",tenant="team-a"}`: 2,
		`edl_job_workers{job="` + a.ID + `",kind="target",tenant="team-a"}`:  3,
		`edl_job_workers{job="` + b.ID + `",kind="current",tenant="team-b"}`: 0,
		`edl_job_samples_per_second{job="` + a.ID + `",tenant="team-a"}`:     1234.5,
		`edl_job_loss{job="` + a.ID + `",tenant="team-a"}`:                   0.25,
		`edl_job_step{job="` + a.ID + `",tenant="team-a"}`:                   420,
		`edl_gpus{state="free"}`:                                             4,
		`edl_gpus{state="held"}`:                                             0,
		`edl_gpus_held{tenant="team-a"}`:                                     2,
		`edl_cpu_slots{state="free"}`:                                        2,
		`edl_resizes_total{kind="grow"}`:                                     2,
		`edl_resizes_total{kind="shrink"}`:                                   1,
		`edl_resizes_total{kind="straggler"}`:                                1,
		`edl_resizes_total{kind="failure"}`:                                  1,
		`edl_checkpoints_total{result="committed"}`:                          1,
		`edl_checkpoints_total{result="skipped"}`:                            1,
		`edl_checkpoints_total{result="failed"}`:                             1,
		`edl_resize_stall_seconds_count`:                                     1,
		`edl_resize_stall_seconds_sum`:                                       0.35,
		`edl_planner_rounds_total`:                                           7,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("%s missing", k)
		} else if got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if age := m[`edl_job_checkpoint_age_seconds{job="`+a.ID+`",tenant="team-a"}`]; age < 59 || age > 120 {
		t.Errorf("checkpoint age %v, want about 60", age)
	}
	if _, ok := m[`edl_job_loss{job="`+b.ID+`",tenant="team-b"}`]; ok {
		t.Errorf("a job that has not trained reports a loss")
	}

	// A second scrape counts only new events; a job that finished in
	// between still has its last events counted, then leaves the gauges.
	if _, err := e.store.AppendEvent(ctx, a.ID, jobs.Event{Type: jobs.EventScale, Data: map[string]any{"from": 2, "to": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Transition(ctx, a.ID, jobs.Succeeded, "done"); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, e)
	if got := m[`edl_resizes_total{kind="shrink"}`]; got != 2 {
		t.Errorf("shrinks after the second scrape %v, want 2", got)
	}
	if got := m[`edl_resizes_total{kind="grow"}`]; got != 2 {
		t.Errorf("grows counted twice: %v", got)
	}
	if _, ok := m[`edl_jobs{state="running",tenant="team-a"}`]; ok {
		t.Errorf("a finished job still counted as running")
	}
	if _, ok := m[`edl_job_workers{job="`+a.ID+`",kind="current",tenant="team-a"}`]; ok {
		t.Errorf("a finished job still has worker gauges")
	}
	m = scrape(t, e)
	if got := m[`edl_resizes_total{kind="shrink"}`]; got != 2 {
		t.Errorf("a finished job's events counted again: shrinks %v", got)
	}
}

func TestMetricsWithoutStoreOrCluster(t *testing.T) {
	// Redis down: the scrape still answers with the HTTP and Go series.
	r := testenv.NewRedis(t)
	e := newEnvWith(t, r, api.Config{})
	_ = r.Client.Close()
	m := scrape(t, e)
	if _, ok := m[`edl_resizes_total{kind="grow"}`]; !ok {
		t.Errorf("counters missing when the store is down")
	}
	if len(m) < 20 {
		t.Errorf("only %d series when the store is down", len(m))
	}
}

// A job that starts and ends between two scrapes is counted: the server
// follows submissions while it runs.
func TestMetricsCountShortJobs(t *testing.T) {
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	srv := api.New(api.Config{}, store, testTenants(t), nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	e := &env{t: t, url: "http://" + ln.Addr().String(), store: store, redis: r}
	waitFor(t, func() bool { return e.get("/healthz", "").code == 200 })
	time.Sleep(100 * time.Millisecond) // the subscription is made as Run starts

	j := e.submit(tokA, exampleJob(t)).job(t)
	for _, ev := range []jobs.Event{
		{Type: jobs.EventScale, Data: map[string]any{"from": 0, "to": 2}},
		{Type: jobs.EventCheckpoint, Data: map[string]any{"step": 10}},
	} {
		if _, err := store.AppendEvent(context.Background(), j.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Transition(context.Background(), j.ID, jobs.Cancelling, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Transition(context.Background(), j.ID, jobs.Cancelled, "test"); err != nil {
		t.Fatal(err)
	}
	m := scrape(t, e)
	if m[`edl_resizes_total{kind="grow"}`] != 1 || m[`edl_checkpoints_total{result="committed"}`] != 1 {
		t.Fatalf("short job's events not counted: grow %v, committed %v", m[`edl_resizes_total{kind="grow"}`], m[`edl_checkpoints_total{result="committed"}`])
	}
	// a late notification about the finished job does not count it again
	if err := store.Notify(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if m := scrape(t, e); m[`edl_resizes_total{kind="grow"}`] != 1 {
		t.Fatalf("counted again after a notification: %v", m[`edl_resizes_total{kind="grow"}`])
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The Grafana dashboard graphs only series /metrics serves.
func TestGrafanaDashboardUsesServedMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "edl.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, testenv.NewRedis(t), api.Config{PlannerRounds: func() int64 { return 1 }})
	j := e.submit(tokA, exampleJob(t)).job(t)
	if err := e.store.SetProgress(context.Background(), j.ID, jobs.Progress{Step: 1, Loss: 1, SamplesPerS: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetCheckpoint(context.Background(), j.ID, jobs.CheckpointRef{Step: 1, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	g := e.submit(tokA, specWith(t, map[string]any{"gpus_per_worker": 1})).job(t)
	if err := e.store.SetWorkerGPUStats(context.Background(), g.ID, jobs.WorkerGPUStats{Worker: "w0", GPUs: []jobs.GPUStat{{UUID: "GPU-1"}}}); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for k := range scrape(t, e) {
		name, _, _ := strings.Cut(k, "{")
		served[name] = true
	}
	// histograms have no samples until observed; their _bucket series exist
	served["edl_resize_stall_seconds_bucket"], served["edl_planner_decide_seconds_bucket"] = true, true
	metric := regexp.MustCompile(`edl_[a-z_]+`)
	if len(dash.Panels) < 10 {
		t.Fatalf("only %d panels", len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				if !served[name] {
					t.Errorf("panel %q graphs %s, which /metrics does not serve", p.Title, name)
				}
			}
		}
	}
}

func TestWorkerGPUMetrics(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gpuJob := e.submit(tokA, specWith(t, map[string]any{"gpus_per_worker": 1})).job(t)
	cpuJob := e.submit(tokA, exampleJob(t)).job(t)
	fresh := jobs.WorkerGPUStats{Worker: "w0", GPUs: []jobs.GPUStat{{UUID: "GPU-1", UtilizationRatio: 0.75, MemoryUsedBytes: 1 << 30, MemoryTotalBytes: 80 << 30, PowerWatts: 312.5}}}
	stale := jobs.WorkerGPUStats{Worker: "w1", Time: time.Now().Add(-10 * time.Minute), GPUs: []jobs.GPUStat{{UUID: "GPU-2", UtilizationRatio: 1}}}
	for _, st := range []jobs.WorkerGPUStats{fresh, stale} {
		if err := e.store.SetWorkerGPUStats(ctx, gpuJob.ID, st); err != nil {
			t.Fatal(err)
		}
	}
	m := scrape(t, e)
	l := `{gpu="GPU-1",job="` + gpuJob.ID + `",tenant="team-a",worker="w0"}`
	for name, want := range map[string]float64{"edl_worker_gpu_utilization_ratio": 0.75, "edl_worker_gpu_memory_used_bytes": 1 << 30, "edl_worker_gpu_power_watts": 312.5} {
		if got, ok := m[name+l]; !ok || got != want {
			t.Errorf("%s%s = %v (present %v), want %v", name, l, got, ok, want)
		}
	}
	for k := range m {
		if strings.Contains(k, "GPU-2") {
			t.Errorf("a stale report is exported: %s", k)
		}
		if strings.HasPrefix(k, "edl_worker_gpu") && strings.Contains(k, cpuJob.ID) {
			t.Errorf("a CPU job has GPU series: %s", k)
		}
	}
}

// edl_deadline_jobs: at_risk counts live deadline jobs at risk now; met and
// missed count the end events, including that of a job that ended before
// the planner tore it down and logged its result.
func TestDeadlineJobsMetric(t *testing.T) {
	r := testenv.NewRedis(t)
	e := newEnvWith(t, r, api.Config{})
	ctx := context.Background()
	spec, err := jobs.DecodeSpec([]byte(specWith(t, map[string]any{"within": "1h", "workers": map[string]any{}})))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := e.store.Create(ctx, "team-a", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, j.ID, func(j *jobs.Job) error { j.AtRisk = true; return nil }); err != nil {
		t.Fatal(err)
	}
	m := scrape(t, e)
	if m[`edl_deadline_jobs{result="at_risk"}`] != 1 || m[`edl_deadline_jobs{result="met"}`] != 0 {
		t.Fatalf("at_risk %v met %v, want 1 and 0", m[`edl_deadline_jobs{result="at_risk"}`], m[`edl_deadline_jobs{result="met"}`])
	}
	for _, to := range []jobs.State{jobs.Starting, jobs.Running, jobs.Succeeded} {
		if _, err := e.store.Transition(ctx, j.ID, to, "test"); err != nil {
			t.Fatal(err)
		}
	}
	scrape(t, e) // ended, not torn down yet: the tail keeps it
	_, _, err = e.store.UpdateWith(ctx, j.ID, func(j *jobs.Job) ([]jobs.Event, error) {
		j.Planner = &jobs.PlannerState{TornDown: true}
		return []jobs.Event{{Type: jobs.EventDeadlineMet, Message: "deadline met"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m = scrape(t, e)
		if m[`edl_deadline_jobs{result="met"}`] != 1 || m[`edl_deadline_jobs{result="missed"}`] != 0 || m[`edl_deadline_jobs{result="at_risk"}`] != 0 {
			t.Fatalf("after the end: %v", m)
		}
	}
}
