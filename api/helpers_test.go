package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	tokA     = "token-team-a"
	tokB     = "token-team-b"
	tokAdmin = "token-admin"
	tokSlow  = "token-slow"
)

type fakeCluster struct {
	capa jobs.Capacity
	err  error
}

func (f fakeCluster) Capacity(context.Context) (jobs.Capacity, error) { return f.capa, f.err }

type env struct {
	t     *testing.T
	url   string
	store *jobstore.Store
	redis *testenv.Redis
}

func testTenants(t *testing.T) *jobs.Tenants {
	t.Helper()
	ts, err := jobs.NewTenants(
		jobs.Tenant{Name: "team-a", TokenSHA256: jobs.HashToken(tokA), GPUQuota: 8, Weight: 2, RatePerS: 10000, Burst: 10000},
		jobs.Tenant{Name: "team-b", TokenSHA256: jobs.HashToken(tokB), RatePerS: 10000, Burst: 10000},
		jobs.Tenant{Name: "ops", TokenSHA256: jobs.HashToken(tokAdmin), Admin: true, RatePerS: 10000, Burst: 10000},
		jobs.Tenant{Name: "slow", TokenSHA256: jobs.HashToken(tokSlow), RatePerS: 0.5, Burst: 2},
	)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// newEnvWith starts the API over r with a fake cluster of one node.
func newEnvWith(t *testing.T, r *testenv.Redis, cfg api.Config) *env {
	t.Helper()
	return newEnvCluster(t, r, cfg, fakeCluster{capa: jobs.Capacity{Nodes: []jobs.Node{{ID: "n1", Name: "node-1", GPUs: 4, FreeGPUs: 4, CPUSlots: 2, FreeCPUSlots: 2}}}})
}

// newEnvCluster starts the API over r with the cluster cl.
func newEnvCluster(t *testing.T, r *testenv.Redis, cfg api.Config, cl fakeCluster) *env {
	t.Helper()
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	srv := api.New(cfg, store, testTenants(t), cl, nil)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &env{t: t, url: hs.URL, store: store, redis: r}
}

func newEnv(t *testing.T) *env { return newEnvWith(t, testenv.NewRedis(t), api.Config{}) }

type reply struct {
	code   int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r reply) job(t *testing.T) jobs.Job {
	t.Helper()
	var j jobs.Job
	r.json(t, &j)
	return j
}

// problem checks that the reply is a problem of the given status and type.
func (r reply) problem(t *testing.T, status int, typ string) api.Problem {
	t.Helper()
	if r.code != status {
		t.Fatalf("status %d, want %d; body %s", r.code, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != api.ProblemContentType {
		t.Fatalf("content type %q, want %q", ct, api.ProblemContentType)
	}
	var p api.Problem
	r.json(t, &p)
	if p.Type != typ || p.Status != status || p.Title == "" {
		t.Fatalf("problem %+v, want type %s status %d", p, typ, status)
	}
	return p
}

type req struct {
	method, path, token, ctype string
	body                       string
	header                     map[string]string
}

func (e *env) do(r req) reply {
	e.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = bytes.NewBufferString(r.body)
	}
	hr, err := http.NewRequest(r.method, e.url+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.ctype != "" {
		hr.Header.Set("Content-Type", r.ctype)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{code: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) get(path, token string) reply {
	e.t.Helper()
	return e.do(req{method: http.MethodGet, path: path, token: token})
}

func (e *env) submit(token, body string) reply {
	e.t.Helper()
	return e.do(req{method: http.MethodPost, path: "/v1/jobs", token: token, ctype: "application/json", body: body})
}

func exampleJob(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// specWith returns the example job with top-level fields replaced.
func specWith(t testing.TB, fields map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(exampleJob(t)), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}
