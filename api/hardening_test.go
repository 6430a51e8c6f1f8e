package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/redis/go-redis/v9"
)

// newEnvOn serves the API over its own Redis client (so its pool can be
// watched) with the test tenants plus a tenant "capped" with job limits.
func newEnvOn(t *testing.T, r *testenv.Redis, rdb *redis.Client, cfg api.Config) (*env, *httptest.Server) {
	t.Helper()
	store := jobstore.New(rdb, jobstore.Config{Prefix: r.Prefix})
	list := append(testTenants(t).All(), jobs.Tenant{Name: "capped", TokenSHA256: jobs.HashToken(tokCapped),
		RatePerS: 10000, Burst: 10000, MaxWorkers: 2, MaxParameters: 100000})
	ts, err := jobs.NewTenants(list...)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(cfg, store, ts, nil, nil)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &env{t: t, url: hs.URL, store: store, redis: r}, hs
}

const tokCapped = "token-capped"

// openRaw starts an event stream as token and returns the response (200
// expected by the caller) or the refusal.
func openRaw(t *testing.T, e *env, token, jobID string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hr, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/jobs/"+jobID+"/events?follow=true", nil)
	hr.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Idle streams each held a pooled Redis connection (300 made a GET take
// 750 ms, 600 failed /readyz). Now they share one reader: with 200 streams
// open on 20 jobs the API holds a handful of connections, a GET and
// /readyz answer, and a new event still reaches its streams.
func TestManyIdleStreamsHoldNoConnections(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	e, _ := newEnvOn(t, r, rdb, api.Config{MaxStreamsPerTenant: 1000, SSEKeepAlive: time.Minute})
	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, e.submit(tokA, exampleJob(t)).job(t).ID)
	}
	var streams []<-chan sseEvent
	for i := 0; i < 200; i++ {
		s := openStream(t, e, ids[i%len(ids)], "")
		next(t, s) // the "submitted" event: the stream is live
		streams = append(streams, s)
	}
	checkIdleStreams(t, e, rdb, "200 idle streams", "/v1/jobs/"+ids[0])
	if _, err := e.store.AppendEvent(t.Context(), ids[3], jobs.Event{Type: jobs.EventWorker, Message: "w joined"}); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < len(streams); i += len(ids) {
		if ev := next(t, streams[i]); ev.data.Message != "w joined" {
			t.Fatalf("stream %d got %+v", i, ev)
		}
	}
}

func TestStreamCapPerTenant(t *testing.T) {
	e := newEnvWith(t, testenv.NewRedis(t), api.Config{MaxStreamsPerTenant: 2})
	j := e.submit(tokA, exampleJob(t)).job(t)
	first := openRaw(t, e, tokA, j.ID)
	second := openRaw(t, e, tokA, j.ID)
	if first.StatusCode != 200 || second.StatusCode != 200 {
		t.Fatalf("streams within the cap: %d %d", first.StatusCode, second.StatusCode)
	}
	third := openRaw(t, e, tokA, j.ID)
	b, _ := io.ReadAll(third.Body)
	reply{code: third.StatusCode, header: third.Header, body: b}.problem(t, http.StatusTooManyRequests, api.ProblemTooManyStreams)
	if s, err := strconv.Atoi(third.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", third.Header.Get("Retry-After"))
	}
	// Pages without follow are not streams.
	if g := e.get("/v1/jobs/"+j.ID+"/events", tokA); g.code != 200 {
		t.Errorf("events page at the cap: %d", g.code)
	}
	// Closing one frees its place.
	first.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := openRaw(t, e, tokA, j.ID)
		if r.StatusCode == 200 {
			break
		}
		r.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("closing a stream did not free its place: %d", r.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Redis down gave 500; it is 503 with Retry-After now, for reads and
// writes alike.
func TestRedisDownIs503(t *testing.T) {
	r := testenv.NewRedisServer(t)
	e := newEnvWith(t, r, api.Config{StoreTimeout: 3 * time.Second})
	j := e.submit(tokA, exampleJob(t)).job(t)
	r.Server.Kill()
	for _, rq := range []req{
		{method: http.MethodGet, path: "/v1/jobs/" + j.ID, token: tokA},
		{method: http.MethodGet, path: "/v1/jobs", token: tokA},
		{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "application/json", body: exampleJob(t)},
		{method: http.MethodDelete, path: "/v1/jobs/" + j.ID, token: tokA},
		{method: http.MethodGet, path: "/v1/jobs/" + j.ID + "/events", token: tokA},
	} {
		got := e.do(rq)
		got.problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
		if ra := got.header.Get("Retry-After"); ra == "" {
			t.Errorf("%s %s: 503 without Retry-After", rq.method, rq.path)
		}
	}
	if err := r.Server.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.get("/v1/jobs/"+j.ID, tokA).code != 200 {
		if time.Now().After(deadline) {
			t.Fatal("job not served again after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A client trickling its body held a connection and a handler for as long
// as it liked; now it gets 408 after BodyReadTimeout, while an event stream
// (no body) lives on well past it.
func TestSlowBodyTimesOut(t *testing.T) {
	e := newEnvWith(t, testenv.NewRedis(t), api.Config{BodyReadTimeout: 300 * time.Millisecond, SSEKeepAlive: 100 * time.Millisecond})
	j := e.submit(tokA, exampleJob(t)).job(t)
	stream := openStream(t, e, j.ID, "")
	next(t, stream)

	host := strings.TrimPrefix(e.url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := exampleJob(t)
	fmt.Fprintf(c, "POST /v1/jobs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", host, tokA, len(body))
	var wmu sync.Mutex
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte every 100 ms: slowloris
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			wmu.Lock()
			_, err := c.Write([]byte{body[i]})
			wmu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // the test's own bound, far above the limit
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a slow body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	reply{code: resp.StatusCode, header: resp.Header, body: b}.problem(t, http.StatusRequestTimeout, api.ProblemRequestTimeout)

	// The stream opened before is still live, 3x the body limit later.
	time.Sleep(time.Second)
	if _, err := e.store.AppendEvent(t.Context(), j.ID, jobs.Event{Type: jobs.EventWorker, Message: "still here"}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, stream); ev.data.Message != "still here" {
		t.Fatalf("stream after the body limit: %+v", ev)
	}
	// And a normal submit is unaffected.
	if r := e.submit(tokA, exampleJob(t)); r.code != 201 {
		t.Errorf("submit: %d %s", r.code, r.body)
	}
}

// Event IDs over uint64 gave 500 (Redis refused them); 400 naming the
// parameter now.
func TestEventIDOverflowIs400(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	huge := "18446744073709551616-0"
	p := e.get("/v1/jobs/"+j.ID+"/events?after="+huge, tokA).problem(t, 400, api.ProblemValidation)
	if len(p.Errors) != 1 || p.Errors[0].Field != "after" {
		t.Errorf("after: %+v", p.Errors)
	}
	for _, follow := range []string{"", "?follow=true"} {
		r := e.do(req{method: http.MethodGet, path: "/v1/jobs/" + j.ID + "/events" + follow, token: tokA, header: map[string]string{"Last-Event-ID": "1-99999999999999999999"}})
		p = r.problem(t, 400, api.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != "Last-Event-ID" {
			t.Errorf("Last-Event-ID%s: %+v", follow, p.Errors)
		}
	}
	if r := e.get("/v1/jobs/"+j.ID+"/events?after=18446744073709551615-0", tokA); r.code != 200 {
		t.Errorf("largest valid id: %d %s", r.code, r.body)
	}
}

func TestStrictBodiesAndLimits(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	e, _ := newEnvOn(t, r, rdb, api.Config{})
	ex := exampleJob(t)
	dup := strings.Replace(ex, `"epochs": 6,`, `"epochs": 6, "epochs": 7,`, 1)
	p := e.submit(tokA, dup).problem(t, 422, api.ProblemValidation)
	if p.Errors[0].Field != "trainer.builtin.epochs" || !strings.Contains(p.Errors[0].Reason, "duplicate") {
		t.Errorf("duplicate key: %+v", p.Errors)
	}
	j := e.submit(tokA, ex).job(t)
	patch := func(body string) reply {
		return e.do(req{method: http.MethodPatch, path: "/v1/jobs/" + j.ID, token: tokA, ctype: "application/merge-patch+json", body: body})
	}
	p = patch(`{"spec":{"workers":{"min":1e400}}}`).problem(t, 422, api.ProblemValidation)
	if p.Errors[0].Field != "spec.workers.min" {
		t.Errorf("1e400: %+v", p.Errors)
	}
	p = patch(`{"spec":{"workers":{"max":2,"max":3}}}`).problem(t, 422, api.ProblemValidation)
	if p.Errors[0].Field != "spec.workers.max" {
		t.Errorf("duplicate in patch: %+v", p.Errors)
	}
	// The unbounded spec.
	big := specWith(t, map[string]any{"workers": map[string]int{"min": 1, "max": 1024}, "trainer": map[string]any{"kind": "builtin", "builtin": map[string]any{
		"model":   map[string]any{"hidden": []int{8192, 8192, 8192, 8192, 8192, 8192, 8192, 8192}},
		"dataset": map[string]any{"seed": 1, "samples": 1 << 21, "features": 65536, "classes": 10, "partitions": 1024},
		"epochs":  1, "batch_size": 1 << 20, "learning_rate": 0.1, "momentum": 0.9}}})
	p = e.submit(tokA, big).problem(t, 422, api.ProblemValidation)
	fields := map[string]bool{}
	for _, f := range p.Errors {
		fields[f.Field] = true
	}
	if !fields["trainer.builtin.model.hidden"] || !fields["trainer.builtin.batch_size"] {
		t.Errorf("unbounded spec: %+v", p.Errors)
	}
	// Per-tenant limits: "capped" may run 2 workers and 100,000 parameters
	// (the example has 660,000).
	p = e.submit(tokCapped, ex).problem(t, 422, api.ProblemValidation)
	fields = map[string]bool{}
	for _, f := range p.Errors {
		fields[f.Field] = true
	}
	if !fields["workers.max"] || !fields["trainer.builtin.model.hidden"] {
		t.Errorf("tenant limits: %+v", p.Errors)
	}
	small := strings.Replace(strings.Replace(ex, `[1024, 512]`, `[64]`, 1), `"max": 3`, `"max": 2`, 1)
	cj := e.submit(tokCapped, small)
	if cj.code != 201 {
		t.Fatalf("spec within the tenant's limits: %d %s", cj.code, cj.body)
	}
	r2 := e.do(req{method: http.MethodPatch, path: "/v1/jobs/" + cj.job(t).ID, token: tokCapped, ctype: "application/json", body: `{"spec":{"workers":{"max":3}}}`})
	if p := r2.problem(t, 422, api.ProblemValidation); p.Errors[0].Field != "spec.workers.max" {
		t.Errorf("patch over max_workers: %+v", p.Errors)
	}
	var me api.TenantStatus
	e.get("/v1/tenants/me", tokCapped).json(t, &me)
	if me.MaxWorkers != 2 || me.MaxParameters != 100000 {
		t.Errorf("tenants/me limits: %+v", me)
	}
}

// checkIdleStreams checks, a poll of the shared reader after the streams
// (what) opened, that they hold no Redis connection (in use, not idle in
// the pool: the opening burst of reads grows the pool) and that the API
// still answers GET path and /readyz.
func checkIdleStreams(t *testing.T, e *env, rdb *redis.Client, what, path string) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	stats := rdb.PoolStats()
	if inUse := stats.TotalConns - stats.IdleConns; inUse > 4 {
		t.Errorf("%s hold %d Redis connections (of %d); want the shared reader's one", what, inUse, stats.TotalConns)
	}
	if g := e.get(path, tokA); g.code != 200 {
		t.Errorf("GET %s with %s: %d", path, what, g.code)
	}
	if g := e.get("/readyz", ""); g.code != 200 {
		t.Errorf("/readyz with %s: %d", what, g.code)
	}
}

// A submit answered 503 because the store did not answer in time was
// created all the same once Redis caught up (seen on edl dev with Redis
// SIGSTOPped for 6 s), and the 503's Retry-After invites a retry: a second
// job. A 503 to a request that changes something says so, and how to
// retry safely; a read's does not.
func TestUnavailableWriteSaysItMayHaveTakenEffect(t *testing.T) {
	r := testenv.NewRedisServer(t)
	e := newEnvWith(t, r, api.Config{StoreTimeout: 3 * time.Second})
	j := e.submit(tokA, exampleJob(t)).job(t)
	r.Server.Kill()
	for _, rq := range []req{
		{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "application/json", body: exampleJob(t)},
		{method: http.MethodDelete, path: "/v1/jobs/" + j.ID, token: tokA},
		{method: http.MethodPost, path: "/v1/jobs/" + j.ID + "/scale", token: tokA, ctype: "application/json", body: `{"workers":1}`},
	} {
		p := e.do(rq).problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
		if !strings.Contains(p.Detail, "may still take effect") || !strings.Contains(p.Detail, "Idempotency-Key") {
			t.Errorf("%s %s: 503 detail %q, want it to say the request may still take effect and to retry with an Idempotency-Key", rq.method, rq.path, p.Detail)
		}
	}
	p := e.get("/v1/jobs/"+j.ID, tokA).problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
	if strings.Contains(p.Detail, "may still take effect") {
		t.Errorf("GET: 503 detail %q speaks of an effect", p.Detail)
	}
}
