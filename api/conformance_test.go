package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Real requests to every route, errors included, checked as a generic
// OpenAPI 3 client would: each request (unless it is meant to be invalid)
// and every response against the spec the server serves.
func TestEveryRouteConformsToTheServedSpec(t *testing.T) {
	r := testenv.NewRedis(t)
	plain := newEnvWith(t, r, api.Config{})
	job := plain.submit(tokA, exampleJob(t)).job(t)
	done := plain.submit(tokA, exampleJob(t)).job(t)
	ctx := context.Background()
	if _, err := plain.store.Transition(ctx, done.ID, jobs.Cancelling, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.store.Transition(ctx, done.ID, jobs.Cancelled, "test"); err != nil {
		t.Fatal(err)
	}
	if err := plain.store.SetProgress(ctx, job.ID, jobs.Progress{Step: 3, Loss: 0.5, SamplesPerS: 10, WorldSize: 1}); err != nil {
		t.Fatal(err)
	}
	fake := fakeCheckpoints{job: job.ID, model: map[int64]string{200: "EDLM-model-bytes"},
		list: []api.Checkpoint{{Step: 200, Epoch: 1, WorldSize: 2, SizeBytes: 16, CreatedAt: time.Unix(1, 0).UTC(),
			Shards: []api.CheckpointShard{{Name: "params", Size: 16, SHA256: "abc123"}}}}}
	wl := fakeWorkerLogs{job: job.ID, worker: "w-1"}
	sws := sweepstore.New(r.Client, sweepstore.Config{Prefix: r.Prefix})
	e := newEnvWith(t, r, api.Config{Checkpoints: fake, SSEKeepAlive: 100 * time.Millisecond,
		Workers: wl, Logs: wl, Membership: coord.RedisMembership{Redis: r.Client, Prefix: r.Prefix}, Sweeps: sws})
	swID, swDone := conformanceSweeps(t, sws, exampleSweep(t)) // sweeps_test.go

	served := e.get("/openapi.json", "")
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(served.body)
	if err != nil {
		t.Fatalf("load the served spec: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("served spec is OpenAPI %q, want 3.x", doc.OpenAPI)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("served spec is invalid: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: e.url}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// A stream is checked as text; its events are JSON checked elsewhere.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}

	id, other := job.ID, done.ID
	tests := []struct {
		name, method, path, token, ctype, body string
		header                                 map[string]string
		status                                 int
		// invalid requests break the spec on purpose (bad JSON, a wrong
		// content type): only their response is checked.
		invalid bool
	}{
		{name: "healthz", method: "GET", path: "/healthz", status: 200},
		{name: "readyz", method: "GET", path: "/readyz", status: 200},
		{name: "metrics", method: "GET", path: "/metrics", status: 200},
		{name: "openapi json", method: "GET", path: "/openapi.json", status: 200},
		{name: "openapi yaml", method: "GET", path: "/openapi.yaml", status: 200},
		{name: "docs redirect", method: "GET", path: "/docs", status: 301},
		{name: "ui redirect", method: "GET", path: "/ui", status: 301},
		{name: "submit", method: "POST", path: "/v1/jobs", token: tokA, ctype: "application/json", body: exampleJob(t), status: 201},
		{name: "submit idempotent replay", method: "POST", path: "/v1/jobs", token: tokA, ctype: "application/json", body: exampleJob(t), header: map[string]string{"Idempotency-Key": "k1"}, status: 201},
		{name: "submit idempotent replay again", method: "POST", path: "/v1/jobs", token: tokA, ctype: "application/json", body: exampleJob(t), header: map[string]string{"Idempotency-Key": "k1"}, status: 200},
		{name: "submit invalid spec", method: "POST", path: "/v1/jobs", token: tokA, ctype: "application/json", body: specWith(t, map[string]any{"workers": map[string]int{"min": 3, "max": 1}}), status: 422},
		{name: "submit malformed", method: "POST", path: "/v1/jobs", token: tokA, ctype: "application/json", body: "{", status: 400, invalid: true},
		{name: "submit as text", method: "POST", path: "/v1/jobs", token: tokA, ctype: "text/plain", body: "hi", status: 415, invalid: true},
		{name: "submit without token", method: "POST", path: "/v1/jobs", ctype: "application/json", body: exampleJob(t), status: 401},
		{name: "list", method: "GET", path: "/v1/jobs?status=pending,cancelled&limit=10", token: tokA, status: 200},
		{name: "list by label", method: "GET", path: "/v1/jobs?label=example%3Dmlp", token: tokA, status: 200},
		{name: "list bad limit", method: "GET", path: "/v1/jobs?limit=0", token: tokA, status: 400},
		{name: "list bad cursor", method: "GET", path: "/v1/jobs?cursor=nope", token: tokA, status: 400},
		{name: "get", method: "GET", path: "/v1/jobs/" + id, token: tokA, status: 200},
		{name: "get another tenant's", method: "GET", path: "/v1/jobs/" + id, token: tokB, status: 404},
		{name: "patch", method: "PATCH", path: "/v1/jobs/" + id, token: tokA, ctype: "application/merge-patch+json", body: `{"spec":{"priority":"opportunistic"}}`, status: 200},
		{name: "patch a forbidden field", method: "PATCH", path: "/v1/jobs/" + id, token: tokA, ctype: "application/merge-patch+json", body: `{"spec":{"name":"x"}}`, status: 422},
		{name: "patch a finished job", method: "PATCH", path: "/v1/jobs/" + other, token: tokA, ctype: "application/merge-patch+json", body: `{"spec":{"priority":"guaranteed"}}`, status: 409},
		{name: "scale", method: "POST", path: "/v1/jobs/" + id + "/scale", token: tokA, ctype: "application/json", body: `{"workers":2}`, status: 202},
		{name: "scale out of range", method: "POST", path: "/v1/jobs/" + id + "/scale", token: tokA, ctype: "application/json", body: `{"workers":99}`, status: 422},
		{name: "scale unknown job", method: "POST", path: "/v1/jobs/j-nope/scale", token: tokA, ctype: "application/json", body: `{"workers":1}`, status: 404},
		{name: "events", method: "GET", path: "/v1/jobs/" + id + "/events?limit=5", token: tokA, status: 200},
		{name: "events bad after", method: "GET", path: "/v1/jobs/" + id + "/events?after=x", token: tokA, status: 400},
		{name: "events stream of a finished job", method: "GET", path: "/v1/jobs/" + other + "/events?follow=true", token: tokA, header: map[string]string{"Accept": "text/event-stream"}, status: 200},
		{name: "progress", method: "GET", path: "/v1/jobs/" + id + "/progress", token: tokA, status: 200},
		{name: "workers", method: "GET", path: "/v1/jobs/" + id + "/workers", token: tokA, status: 200},
		{name: "workers of another tenant's", method: "GET", path: "/v1/jobs/" + id + "/workers", token: tokB, status: 404},
		{name: "logs", method: "GET", path: "/v1/jobs/" + id + "/logs?worker=w-1&stream=stdout&tail=10", token: tokA, status: 200},
		{name: "logs bad stream", method: "GET", path: "/v1/jobs/" + id + "/logs?stream=both", token: tokA, status: 400, invalid: true},
		{name: "logs unknown job", method: "GET", path: "/v1/jobs/j-nope/logs", token: tokA, status: 404},
		{name: "progress bad since", method: "GET", path: "/v1/jobs/" + id + "/progress?since=x", token: tokA, status: 400},
		{name: "progress of another tenant's", method: "GET", path: "/v1/jobs/" + id + "/progress", token: tokB, status: 404},
		{name: "checkpoints", method: "GET", path: "/v1/jobs/" + id + "/checkpoints", token: tokA, status: 200},
		{name: "checkpoints unknown job", method: "GET", path: "/v1/jobs/j-nope/checkpoints", token: tokA, status: 404},
		{name: "model", method: "GET", path: "/v1/jobs/" + id + "/checkpoints/200/model", token: tokA, status: 200},
		{name: "model unknown step", method: "GET", path: "/v1/jobs/" + id + "/checkpoints/300/model", token: tokA, status: 404},
		{name: "cluster", method: "GET", path: "/v1/cluster", token: tokAdmin, status: 200},
		{name: "cluster as a tenant", method: "GET", path: "/v1/cluster", token: tokA, status: 403},
		{name: "tenant", method: "GET", path: "/v1/tenants/me", token: tokA, status: 200},
		{name: "tenant bad token", method: "GET", path: "/v1/tenants/me", token: "nope", status: 401},
		{name: "cancel", method: "DELETE", path: "/v1/jobs/" + id, token: tokA, status: 202},
		{name: "cancel a finished job", method: "DELETE", path: "/v1/jobs/" + other, token: tokA, status: 409},
		{name: "sweep submit", method: "POST", path: "/v1/sweeps", token: tokA, ctype: "application/json", body: exampleSweep(t), status: 201},
		{name: "sweep submit invalid", method: "POST", path: "/v1/sweeps", token: tokA, ctype: "application/json", body: `{"name":"x"}`, status: 422, invalid: true},
		{name: "sweep list", method: "GET", path: "/v1/sweeps?limit=5", token: tokA, status: 200},
		{name: "sweep get", method: "GET", path: "/v1/sweeps/" + swID, token: tokA, status: 200},
		{name: "sweep get another tenant's", method: "GET", path: "/v1/sweeps/" + swID, token: tokB, status: 404},
		{name: "sweep events", method: "GET", path: "/v1/sweeps/" + swID + "/events", token: tokA, status: 200},
		{name: "sweep events stream of a finished sweep", method: "GET", path: "/v1/sweeps/" + swDone + "/events?follow=true", token: tokA, header: map[string]string{"Accept": "text/event-stream"}, status: 200},
		{name: "sweep cancel", method: "DELETE", path: "/v1/sweeps/" + swID, token: tokA, status: 202},
		{name: "sweep cancel a finished sweep", method: "DELETE", path: "/v1/sweeps/" + swDone, token: tokA, status: 409},
	}
	hit := map[string]bool{}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("%s %s is not in the served spec: %v", tc.method, tc.path, err)
			}
			hit[strings.ToLower(tc.method)+" "+route.Path] = true
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
			if !tc.invalid {
				if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
					t.Fatalf("request does not match the spec: %v", err)
				}
				req.Body = io.NopCloser(strings.NewReader(tc.body)) // validation read it
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != api.ProblemContentType {
				t.Errorf("error content type %q", resp.Header.Get("Content-Type"))
			}
			out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
				Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)), Options: opts}
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				t.Errorf("response %d does not match the spec: %v\n%s", resp.StatusCode, err, trim(body))
			}
		})
	}
	// Every operation of the spec was exercised.
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !hit[strings.ToLower(method)+" "+path] {
				t.Errorf("no request checked %s %s", method, path)
			}
		}
	}
}

func trim(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// fakeWorkerLogs is one running worker of job with a two-line stdout.
type fakeWorkerLogs struct{ job, worker string }

func (f fakeWorkerLogs) Workers(_ context.Context, jobID string) ([]jobs.Worker, error) {
	if jobID != f.job {
		return nil, nil
	}
	return []jobs.Worker{{ID: f.worker, JobID: jobID, Node: "n1", State: jobs.WorkerRunning, Started: time.Unix(5, 0).UTC()}}, nil
}

func (f fakeWorkerLogs) Logs(_ context.Context, jobID, workerID, stream string, tail int, follow bool) (io.ReadCloser, error) {
	if jobID != f.job || workerID != f.worker {
		return nil, fmt.Errorf("worker %s of %s: %w", workerID, jobID, fs.ErrNotExist)
	}
	return io.NopCloser(strings.NewReader("line 1\nline 2\n")), nil
}
