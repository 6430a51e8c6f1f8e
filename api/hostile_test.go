package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

// The attacks of a hostile pass over the API that got a 5xx, a leak or
// the wrong answer, each as it is answered now.

// after=MAX-MAX is a valid event ID, past every event: an empty page
// (was 500, "invalid start ID for the interval").
func TestEventsAfterTheLargestID(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	const max = "18446744073709551615-18446744073709551615"
	r := e.get("/v1/jobs/"+j.ID+"/events?after="+max, tokA)
	if r.code != http.StatusOK {
		t.Fatalf("after=%s: %d %s", max, r.code, r.body)
	}
	var page api.EventPage
	r.json(t, &page)
	if len(page.Events) != 0 || page.Next != max {
		t.Errorf("page %+v, want no events and next %s", page, max)
	}
	for _, bad := range []string{"-1-0", "1-", "x", "1-2-3", "%00", strings.Repeat("9", 400)} {
		p := e.get("/v1/jobs/"+j.ID+"/events?after="+bad, tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != "after" {
			t.Errorf("after=%s: %+v", bad, p.Errors)
		}
	}
}

// ?next=garbage was ignored (the first page came back): the cursor may be
// passed as next (the field a page carries) or cursor, and a bad one is 400
// naming the parameter given.
func TestListNextCursor(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.submit(tokA, exampleJob(t)).job(t)
	}
	for _, param := range []string{"next", "cursor"} {
		p := e.get("/v1/jobs?"+param+"=garbage", tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != param {
			t.Errorf("%s=garbage: %+v", param, p.Errors)
		}
	}
	var first, second api.JobList
	e.get("/v1/jobs?limit=2", tokA).json(t, &first)
	if first.Next == "" || len(first.Jobs) != 2 {
		t.Fatalf("first page: %d jobs, next %q", len(first.Jobs), first.Next)
	}
	e.get("/v1/jobs?limit=2&next="+first.Next, tokA).json(t, &second)
	if len(second.Jobs) != 1 || second.Jobs[0].ID == first.Jobs[0].ID || second.Jobs[0].ID == first.Jobs[1].ID {
		t.Errorf("second page by next: %+v", second.Jobs)
	}
	p := e.get("/v1/jobs?next="+first.Next+"&cursor=c1.MQ", tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
	if p.Errors[0].Field != "next" {
		t.Errorf("next and cursor that differ: %+v", p.Errors)
	}
}

// A 404 on logs named the server's absolute path of the log file.
func TestLogsNotFoundNamesNoServerPath(t *testing.T) {
	le := newLogEnv(t)
	for _, q := range []string{"?worker=nobody", "?worker=" + le.ids[0] + "x&stream=stderr"} {
		r := le.get("/v1/jobs/"+le.job.ID+"/logs"+q, tokA)
		le.env.t.Helper()
		r.problem(t, http.StatusNotFound, api.ProblemNotFound)
		if strings.Contains(string(r.body), "/") && regexp.MustCompile(`/(tmp|home|var|work|root)\b|\.log`).Match(r.body) {
			t.Errorf("%s: the problem names a server path: %s", q, r.body)
		}
	}
}

// /metrics answered anyone with every tenant's job IDs and names. Without
// a token it now has no series labelled by job, tenant or worker; the admin
// token (or --metrics-token) gets them all; a tenant's token is refused;
// with a metrics token set, a scrape without it is 401.
func TestMetricsNeedAToken(t *testing.T) {
	r := testenv.NewRedis(t)
	e := newEnvWith(t, r, api.Config{})
	j := e.submit(tokA, exampleJob(t)).job(t)
	labelled := regexp.MustCompile(`\{[^}]*\b(job|tenant|worker)="`)
	open := e.get("/metrics", "")
	if open.code != http.StatusOK || !strings.Contains(string(open.body), "edl_http_requests_total") {
		t.Fatalf("anonymous scrape: %d %.300s", open.code, open.body)
	}
	if m := labelled.Find(open.body); m != nil || strings.Contains(string(open.body), j.ID) || strings.Contains(string(open.body), "team-a") {
		t.Errorf("anonymous scrape shows per-job or per-tenant series (%s)", m)
	}
	full := e.get("/metrics", tokAdmin)
	if full.code != http.StatusOK || !strings.Contains(string(full.body), `edl_jobs{state="pending",tenant="team-a"} 1`) {
		t.Errorf("admin scrape: %d, lacks edl_jobs of team-a", full.code)
	}
	e.get("/metrics", tokA).problem(t, http.StatusForbidden, api.ProblemForbidden)
	e.get("/metrics", "nope").problem(t, http.StatusUnauthorized, api.ProblemUnauthorized)

	const mt = "scrape-token-0123456789"
	e2 := newEnvWith(t, r, api.Config{MetricsToken: mt})
	e2.get("/metrics", "").problem(t, http.StatusUnauthorized, api.ProblemUnauthorized)
	e2.get("/metrics", "wrong").problem(t, http.StatusUnauthorized, api.ProblemUnauthorized)
	for _, tok := range []string{mt, tokAdmin} {
		if got := e2.get("/metrics", tok); got.code != http.StatusOK || !labelled.Match(got.body) {
			t.Errorf("scrape with %s: %d, want every series", tok, got.code)
		}
	}
}

// /docs/ had no Content-Security-Policy. The Swagger UI's page has one now
// that allows its own inline script by hash and nothing inline besides.
func TestDocsHaveACSP(t *testing.T) {
	e := newEnv(t)
	r := e.get("/docs/index.html", "")
	csp := r.header.Get("Content-Security-Policy")
	if r.code != http.StatusOK || csp == "" {
		t.Fatalf("/docs/index.html: %d, CSP %q", r.code, csp)
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	m := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindSubmatch(r.body)
	if m == nil {
		t.Fatal("no inline script in the Swagger UI page")
	}
	sum := sha256.Sum256(m[1])
	if h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, h) {
		t.Errorf("CSP %q lacks the inline script's hash %s", csp, h)
	}
	for _, p := range []string{"/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"} {
		if got := e.get(p, ""); got.code != http.StatusOK || got.header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: %d, CSP %q", p, got.code, got.header.Get("Content-Security-Policy"))
		}
	}
}

// blockingLogs is a log source whose reads wait for release (or for the
// request's context, as a store call does).
type blockingLogs struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingLogs) Logs(ctx context.Context, jobID, workerID, stream string, tail int, follow bool) (io.ReadCloser, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return io.NopCloser(strings.NewReader("hello\n")), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runServer serves cfg on a free port until the returned cancel.
func runServer(t *testing.T, cfg api.Config) (*env, context.CancelFunc, <-chan error) {
	t.Helper()
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	srv := api.New(cfg, store, testTenants(t), nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	return &env{t: t, url: "http://" + ln.Addr().String(), store: store, redis: r}, cancel, done
}

// A request in flight when the server began to stop got 500 ("context
// canceled"): it is drained now, and one still running when the grace is
// over gets 503 with Retry-After.
func TestShutdownDrainsRequests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool
		status  int
	}{{"drained", true, http.StatusOK}, {"cut", false, http.StatusServiceUnavailable}} {
		t.Run(tc.name, func(t *testing.T) {
			src := &blockingLogs{entered: make(chan struct{}, 1), release: make(chan struct{})}
			e, stop, done := runServer(t, api.Config{Logs: src, ShutdownGrace: 500 * time.Millisecond})
			j := e.submit(tokA, exampleJob(t)).job(t)
			got := make(chan reply, 1)
			go func() { got <- e.get("/v1/jobs/"+j.ID+"/logs?worker=w1", tokA) }()
			<-src.entered
			stop()
			// Once the listener is closed the server is shutting down.
			for {
				c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.url, "http://"), time.Second)
				if err != nil {
					break
				}
				c.Close()
				time.Sleep(10 * time.Millisecond)
			}
			if tc.release {
				close(src.release)
			}
			r := <-got
			if r.code != tc.status {
				t.Fatalf("in-flight request: %d %s, want %d", r.code, r.body, tc.status)
			}
			if tc.status == http.StatusServiceUnavailable {
				r.problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
				if r.header.Get("Retry-After") == "" {
					t.Error("503 without Retry-After")
				}
			} else if string(r.body) != "hello\n" {
				t.Errorf("drained body %q", r.body)
			}
			select {
			case err := <-done:
				if tc.release && err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return")
			}
		})
	}
}

// since= the largest point ID was 500 (Redis refused the exclusive start);
// a time before 1970 made an ID with a negative part (422 from the store).
func TestProgressSinceAtTheEdges(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	for _, since := range []string{"18446744073709551615-18446744073709551615", "1900-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		r := e.get("/v1/jobs/"+j.ID+"/progress?since="+since, tokA)
		if r.code != http.StatusOK {
			t.Errorf("since=%s: %d %s", since, r.code, r.body)
		}
	}
}

// Two Content-Type headers (application/json, then text/plain) were read as
// the first and the body accepted; two Authorization headers as the first.
// RFC 9110 gives each one value: a request with two is refused, whichever
// comes first.
func TestRepeatedHeadersRefused(t *testing.T) {
	e := newEnv(t)
	send := func(h http.Header, body string) (int, api.Problem) {
		t.Helper()
		hr, err := http.NewRequest(http.MethodPost, e.url+"/v1/jobs", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		hr.Header = h
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p api.Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p
	}
	spec := exampleJob(t)
	for _, cts := range [][]string{{"application/json", "text/plain"}, {"text/plain", "application/json"}, {"application/json", "application/json"}} {
		code, p := send(http.Header{"Authorization": {"Bearer " + tokA}, "Content-Type": cts}, spec)
		if code != http.StatusUnsupportedMediaType || p.Type != api.ProblemUnsupportedMedia {
			t.Errorf("Content-Type %q: %d %s, want 415", cts, code, p.Type)
		}
	}
	for _, auth := range [][]string{{"Bearer " + tokA, "Bearer nope"}, {"Bearer nope", "Bearer " + tokA}} {
		code, p := send(http.Header{"Authorization": auth, "Content-Type": {"application/json"}}, spec)
		if code != http.StatusUnauthorized || p.Type != api.ProblemUnauthorized {
			t.Errorf("Authorization %q: %d %s, want 401", auth, code, p.Type)
		}
	}
	if code, _ := send(http.Header{"Authorization": {"Bearer " + tokA}, "Content-Type": {"application/json"}}, spec); code != http.StatusCreated {
		t.Errorf("one of each: %d, want 201", code)
	}
}

// A Content-Encoding the API does not decode (gzip) was ignored: a
// compressed body was 400 "malformed JSON at byte 1: invalid character
// '\x1f'", and a body labelled gzip but sent plain was accepted. Either is
// 415 naming the coding now (RFC 9110 15.5.16), with Accept-Encoding:
// identity; identity itself is fine.
func TestContentEncodingRefused(t *testing.T) {
	e := newEnv(t)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte(exampleJob(t)))
	_ = w.Close()
	for _, tc := range []struct{ coding, body string }{{"gzip", gz.String()}, {"gzip", exampleJob(t)}, {"br", exampleJob(t)}, {"identity, gzip", exampleJob(t)}} {
		r := e.do(req{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "application/json", body: tc.body,
			header: map[string]string{"Content-Encoding": tc.coding}})
		p := r.problem(t, http.StatusUnsupportedMediaType, api.ProblemUnsupportedMedia)
		if !strings.Contains(p.Detail, "Content-Encoding") || !strings.Contains(p.Detail, tc.coding) {
			t.Errorf("Content-Encoding %q: detail %q, want the coding named", tc.coding, p.Detail)
		}
		if got := r.header.Get("Accept-Encoding"); got != "identity" {
			t.Errorf("Content-Encoding %q: Accept-Encoding %q, want identity", tc.coding, got)
		}
	}
	r := e.do(req{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "application/json", body: exampleJob(t),
		header: map[string]string{"Content-Encoding": "identity"}})
	if r.code != http.StatusCreated {
		t.Errorf("Content-Encoding identity: %d %s, want 201", r.code, r.body)
	}
}
