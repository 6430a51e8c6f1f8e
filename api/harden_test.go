package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/redis/go-redis/v9"
)

// Every answer of the API, JSON, problems, pages, streams' refusals, the
// spec, the docs, the dashboard and what no route matches, says
// X-Content-Type-Options: nosniff (only the docs and the dashboard did), and
// the dashboard's Content-Security-Policy restricts <base>, form targets and
// framing as the docs' does.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	for _, r := range []req{
		{method: http.MethodGet, path: "/v1/jobs", token: tokA},
		{method: http.MethodGet, path: "/v1/jobs/" + j.ID, token: tokA},
		{method: http.MethodGet, path: "/v1/jobs/nope", token: tokA},
		{method: http.MethodGet, path: "/v1/jobs"},
		{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "text/plain", body: "x"},
		{method: http.MethodGet, path: "/v1/jobs/" + j.ID + "/events", token: tokA},
		{method: http.MethodGet, path: "/v1/jobs/" + j.ID + "/progress", token: tokA},
		{method: http.MethodGet, path: "/v1/tenants/me", token: tokA},
		{method: http.MethodDelete, path: "/v1/tenants/me", token: tokA},
		{method: http.MethodHead, path: "/v1/jobs", token: tokA},
		{method: http.MethodGet, path: "/healthz"},
		{method: http.MethodGet, path: "/metrics"},
		{method: http.MethodGet, path: "/openapi.json"},
		{method: http.MethodGet, path: "/nowhere"},
		{method: http.MethodGet, path: "/docs/index.html"},
		{method: http.MethodGet, path: "/ui/"},
	} {
		got := e.do(r)
		if v := got.header.Get("X-Content-Type-Options"); v != "nosniff" {
			t.Errorf("%s %s: %d, X-Content-Type-Options %q, want nosniff", r.method, r.path, got.code, v)
		}
	}
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/nope.js", "/docs/index.html"} {
		csp := e.get(p, "").header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("%s: CSP %q lacks %s", p, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline code", p, csp)
		}
	}
}

// Sweep event streams each blocked in an XREAD of their own, a pooled Redis
// connection per open stream (100 streams on a pool of 64: every connection
// held, the API starved). They share one reader now, as job streams do:
// 100 idle sweep streams hold a handful of connections, a GET and /readyz
// answer, a new event reaches every stream and the sweep's end ends them.
func TestManySweepStreamsHoldNoConnections(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 64})
	t.Cleanup(func() { rdb.Close() })
	sweeps := sweepstore.New(rdb, sweepstore.Config{Prefix: r.Prefix})
	e, _ := newEnvOn(t, r, rdb, api.Config{MaxStreamsPerTenant: 1000, SSEKeepAlive: time.Minute, Sweeps: sweeps})
	var ids []string
	for i := 0; i < 4; i++ {
		sr := e.submitSweep(tokA, strings.Replace(exampleSweep(t), `"seed": 1`, fmt.Sprintf(`"seed": %d`, i+1), 1), nil)
		var sw sweep.Sweep
		sr.json(t, &sw)
		ids = append(ids, sw.ID)
	}
	var streams []<-chan sseEvent
	for i := 0; i < 100; i++ {
		s := openSSE(t, e, "/v1/sweeps/"+ids[i%len(ids)]+"/events?follow=true", "")
		next(t, s) // the first event: the stream is live
		streams = append(streams, s)
	}
	checkIdleStreams(t, e, rdb, "100 idle sweep streams", "/v1/sweeps/"+ids[0])
	if d := e.do(req{method: http.MethodDelete, path: "/v1/sweeps/" + ids[1], token: tokA}); d.code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", d.code, d.body)
	}
	for i := 1; i < len(streams); i += len(ids) {
		if ev := next(t, streams[i]); ev.event != "state" || ev.data.Data["to"] != "cancelling" {
			t.Fatalf("stream %d got %+v", i, ev)
		}
	}
	if _, err := sweeps.Update(t.Context(), ids[1], func(sw *sweep.Sweep) ([]sweep.Event, error) {
		sw.State = sweep.Cancelled
		return []sweep.Event{{Type: sweep.EventState, Message: "cancelling -> cancelled", Data: map[string]any{"from": "cancelling", "to": "cancelled"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(streams); i += len(ids) {
		if ev := next(t, streams[i]); ev.data.Data["to"] != "cancelled" {
			t.Fatalf("stream %d got %+v", i, ev)
		}
		select {
		case ev, ok := <-streams[i]:
			if ok {
				t.Fatalf("stream %d went on after the sweep ended: %+v", i, ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d did not end with the sweep", i)
		}
	}
}

// smallBufListener shrinks each accepted connection's send buffer, so that a
// client that stops reading blocks the server's writes after a few KiB
// rather than after the megabytes the kernel would otherwise buffer.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// endlessLogs is a log source whose every log goes on without end.
type endlessLogs struct{}

func (endlessLogs) Logs(ctx context.Context, jobID, workerID, stream string, tail int, follow bool) (io.ReadCloser, error) {
	line := strings.Repeat("x", 1023) + "\n"
	return io.NopCloser(readerFunc(func(p []byte) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return copy(p, line), nil
	})), nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// stalledGET sends GET path with token on a fresh TCP connection whose
// receive buffer is small, and reads nothing of the answer.
func stalledGET(t *testing.T, addr, path, token string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, addr, token)
	return c
}

// readRest reads what the server still sends: the whole answer (nil) or a
// cut one (the error that says so).
func readRest(t *testing.T, c net.Conn) (int, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return len(b), err
}

// A client that stopped reading a large answer (a page of jobs, a followed
// log) held its handler, goroutine and buffers for as long as it kept the
// connection open: the server had no write timeout. A page must now be
// written within WriteTimeout, and each write of a stream taken within
// StreamWriteTimeout, else the connection is cut (and a stream's slot of
// the tenant freed); a client that reads keeps a stream however long it
// stays open.
func TestSlowReadersAreCutOff(t *testing.T) {
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	cfg := api.Config{WriteTimeout: 2 * time.Second, StreamWriteTimeout: time.Second, MaxStreamsPerTenant: 1,
		SSEKeepAlive: 300 * time.Millisecond, Logs: endlessLogs{}}
	srv := api.New(cfg, store, testTenants(t), nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, smallBufListener{ln}) }()
	t.Cleanup(func() { cancel(); <-done })
	addr := ln.Addr().String()
	e := &env{t: t, url: "http://" + addr, store: store, redis: r}
	labels := map[string]string{}
	for i := range 16 {
		labels[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", 60)
	}
	var id string
	for range 120 {
		id = e.submit(tokA, specWith(t, map[string]any{"labels": labels})).job(t).ID
	}

	t.Run("page", func(t *testing.T) {
		// A reader gets the whole page.
		if g := e.get("/v1/jobs?limit=500", tokA); g.code != 200 || len(g.body) < 200<<10 {
			t.Fatalf("page: %d, %d bytes", g.code, len(g.body))
		}
		c := stalledGET(t, addr, "/v1/jobs?limit=500", tokA)
		time.Sleep(4 * time.Second) // past WriteTimeout
		if n, err := readRest(t, c); err == nil {
			t.Fatalf("a client that stopped reading for 4s still got the whole page (%d bytes): the server waited on it", n)
		}
	})

	t.Run("stream", func(t *testing.T) {
		c := stalledGET(t, addr, "/v1/jobs/"+id+"/logs?worker=w1&follow=true", tokA)
		time.Sleep(3 * time.Second) // past StreamWriteTimeout
		// The stalled stream was dropped, so the tenant's one stream is free
		// (openSSE fails on a 429).
		s := openStream(t, e, id, "")
		if ev := next(t, s); ev.data.Message != "submitted" {
			t.Fatalf("first event %+v", ev)
		}
		if _, err := readRest(t, c); err == nil {
			t.Fatal("the stalled log stream ended cleanly; want it cut")
		}
		// A stream that is read outlives both timeouts.
		time.Sleep(3 * time.Second)
		if _, err := e.store.AppendEvent(t.Context(), id, jobs.Event{Type: jobs.EventWorker, Message: "w joined"}); err != nil {
			t.Fatal(err)
		}
		if ev := next(t, s); ev.data.Message != "w joined" {
			t.Fatalf("after 3s: %+v", ev)
		}
	})
}
