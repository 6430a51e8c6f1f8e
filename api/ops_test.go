package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id, event string
	data      jobs.Event
}

// openStream starts GET .../events?follow=true and returns parsed events as
// they arrive; the channel closes when the server ends the stream.
func openStream(t *testing.T, e *env, jobID, lastID string) <-chan sseEvent {
	t.Helper()
	return openSSE(t, e, "/v1/jobs/"+jobID+"/events?follow=true", lastID)
}

// openSSE starts GET path (an event stream) as tokA, after lastID when
// set, and returns its events as they arrive; the channel closes when the
// server ends the stream.
func openSSE(t *testing.T, e *env, path, lastID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hr, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
	hr.Header.Set("Authorization", "Bearer "+tokA)
	if lastID != "" {
		hr.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 100)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				cur.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data)
			case line == "" && cur.id != "":
				out <- cur
				cur = sseEvent{}
			}
		}
	}()
	return out
}

func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("stream ended early")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return sseEvent{}
}

func TestEventStream(t *testing.T) {
	e := newEnvWith(t, testenv.NewRedis(t), api.Config{SSEKeepAlive: 100 * time.Millisecond})
	ctx := t.Context()
	j := e.submit(tokA, exampleJob(t)).job(t)
	stream := openStream(t, e, j.ID, "")
	first := next(t, stream)
	if first.event != "state" || first.data.Message != "submitted" || first.id == "" || first.data.ID != first.id {
		t.Fatalf("first event %+v", first)
	}
	if _, err := e.store.Transition(ctx, j.ID, jobs.Starting, "placing"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.AppendEvent(ctx, j.ID, jobs.Event{Type: jobs.EventWorker, Message: "worker 0 joined"}); err != nil {
		t.Fatal(err)
	}
	second, third := next(t, stream), next(t, stream)
	if second.data.Message != "pending -> starting" || third.event != "worker" {
		t.Fatalf("live events %+v %+v", second, third)
	}
	// Resume from the second event: the third comes again, then new ones.
	resumed := openStream(t, e, j.ID, second.id)
	if ev := next(t, resumed); ev.id != third.id {
		t.Fatalf("resumed at %s, want %s", ev.id, third.id)
	}
	for _, to := range []jobs.State{jobs.Running, jobs.Succeeded} {
		if _, err := e.store.Transition(ctx, j.ID, to, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"starting -> running", "running -> succeeded"} {
		if ev := next(t, resumed); ev.data.Message != want {
			t.Fatalf("got %q, want %q", ev.data.Message, want)
		}
	}
	select { // the stream ends after the terminal state
	case ev, ok := <-resumed:
		if ok {
			t.Fatalf("event after the end: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not end after the job finished")
	}
	var page api.EventPage
	e.get("/v1/jobs/"+j.ID+"/events?limit=2", tokA).json(t, &page)
	if len(page.Events) != 2 || page.Next != page.Events[1].ID {
		t.Fatalf("page %+v", page)
	}
	var rest api.EventPage
	e.get("/v1/jobs/"+j.ID+"/events?after="+page.Next, tokA).json(t, &rest)
	if len(rest.Events) != 3 {
		t.Errorf("rest: %d events", len(rest.Events))
	}
	e.get("/v1/jobs/"+j.ID+"/events?after=x", tokA).problem(t, 400, api.ProblemValidation)
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t)
	codes := []int{}
	var last reply
	for i := 0; i < 3; i++ {
		last = e.get("/v1/tenants/me", tokSlow)
		codes = append(codes, last.code)
	}
	if codes[0] != 200 || codes[1] != 200 {
		t.Fatalf("burst of 2 refused: %v", codes)
	}
	last.problem(t, http.StatusTooManyRequests, api.ProblemRateLimited)
	if s, err := strconv.Atoi(last.header.Get("Retry-After")); err != nil || s < 1 || s > 2 {
		t.Errorf("Retry-After %q", last.header.Get("Retry-After"))
	}
	if r := e.get("/v1/tenants/me", tokA); r.code != 200 {
		t.Errorf("another tenant limited: %d", r.code)
	}
}

func TestClusterAndTenant(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, specWith(t, map[string]any{"gpus_per_worker": 2})).job(t)
	if err := e.store.SetWorkers(t.Context(), j.ID, 3, 3); err != nil {
		t.Fatal(err)
	}
	e.get("/v1/cluster", tokA).problem(t, http.StatusForbidden, api.ProblemForbidden)
	var cs api.ClusterStatus
	r := e.get("/v1/cluster", tokAdmin)
	r.json(t, &cs)
	if r.code != 200 || cs.Capacity == nil || cs.Capacity.Nodes[0].GPUs != 4 || len(cs.Jobs) != 1 || cs.Jobs[0].GPUs != 6 {
		t.Fatalf("cluster: %d %s", r.code, r.body)
	}
	var me api.TenantStatus
	e.get("/v1/tenants/me", tokA).json(t, &me)
	if me.Name != "team-a" || me.GPUQuota != 8 || me.Weight != 2 || me.Usage.GPUs != 6 || me.Usage.Workers != 3 || me.Usage.Jobs[jobs.Pending] != 1 {
		t.Errorf("me: %+v", me)
	}
	e.get("/v1/tenants/me", tokB).json(t, &me)
	if me.Name != "team-b" || me.Usage.GPUs != 0 {
		t.Errorf("team-b: %+v", me)
	}
}

func TestOperations(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := e.get(path, ""); r.code != 200 {
			t.Errorf("%s: %d", path, r.code)
		}
	}
	e.submit(tokA, exampleJob(t))
	e.get("/v1/jobs/j-none", tokA)
	m := e.get("/metrics", "")
	for _, want := range []string{
		`edl_http_requests_total{code="201",method="POST",route="/v1/jobs"} 1`,
		`edl_http_requests_total{code="404",method="GET",route="/v1/jobs/:id"} 1`,
		`edl_http_request_duration_seconds_bucket{method="POST",route="/v1/jobs"`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var spec map[string]any
	js := e.get("/openapi.json", "")
	js.json(t, &spec)
	if v, _ := spec["openapi"].(string); !strings.HasPrefix(v, "3.0") || spec["paths"].(map[string]any)["/v1/jobs"] == nil {
		t.Errorf("openapi.json: %.200s", js.body)
	}
	if y := e.get("/openapi.yaml", ""); y.code != 200 || !strings.Contains(string(y.body), "/v1/jobs/{id}/scale:") {
		t.Errorf("openapi.yaml: %d %.200s", y.code, y.body)
	}
	if d := e.get("/docs", ""); d.code != http.StatusMovedPermanently {
		t.Errorf("/docs: %d", d.code)
	}
	if ui := e.get("/docs/index.html", ""); ui.code != 200 || !strings.Contains(string(ui.body), "swagger") {
		t.Errorf("/docs/index.html: %d", ui.code)
	}
}

func TestReadyzWithoutRedis(t *testing.T) {
	r := testenv.NewRedisServer(t)
	e := newEnvWith(t, r, api.Config{})
	if got := e.get("/readyz", ""); got.code != 200 {
		t.Fatalf("readyz with redis: %d", got.code)
	}
	r.Server.Kill()
	e.get("/readyz", "").problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
	if got := e.get("/healthz", ""); got.code != 200 {
		t.Errorf("healthz without redis: %d", got.code)
	}
}

func TestRunShutsDownWithOpenStream(t *testing.T) {
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	srv := api.New(api.Config{ShutdownGrace: 5 * time.Second}, store, testTenants(t), nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	e := &env{t: t, url: "http://" + ln.Addr().String(), store: store, redis: r}
	j := e.submit(tokA, exampleJob(t)).job(t)
	stream := openStream(t, e, j.ID, "")
	next(t, stream)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Run did not return within 4s of ctx ending with a stream open")
	}
}
