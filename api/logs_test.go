package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/local"
	"github.com/edl-nomad/edl/worker/coord"
)

// chatty is a worker that writes three stdout lines and one stderr line,
// waits for $CTL/go-<index>, writes one more line and exits 0.
const chatty = `echo "w$EDL_WORKER_INDEX line 1"; echo "w$EDL_WORKER_INDEX line 2"; echo "w$EDL_WORKER_INDEX line 3"
echo "w$EDL_WORKER_INDEX oops" >&2
while [ ! -f "$CTL/go-$EDL_WORKER_INDEX" ]; do sleep 0.02; done
echo "w$EDL_WORKER_INDEX bye"`

type logEnv struct {
	*env
	cluster *local.Cluster
	ctl     string
	job     jobs.Job
	ids     []string // worker IDs by index
}

// newLogEnv runs the API over a real local cluster with a job of team-a
// that has two chatty workers; worker 1 is rank 0 of generation 4.
func newLogEnv(t *testing.T, tune ...func(*api.Config)) *logEnv {
	t.Helper()
	r := testenv.NewRedis(t)
	ctl, logDir := t.TempDir(), t.TempDir()
	cl, err := local.New(local.Config{
		Command:    []string{"/bin/sh", "-c", chatty, "chatty"},
		WorkerArgs: func(jobs.Job, int, string) []string { return nil },
		Env:        []string{"CTL=" + ctl},
		LogDir:     logDir,
		Slots:      4,
		Grace:      2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cl.Close(ctx)
	})
	cfg := api.Config{Workers: cl, Logs: cl, Membership: coord.RedisMembership{Redis: r.Client, Prefix: r.Prefix},
		SSEKeepAlive: 50 * time.Millisecond}
	for _, f := range tune {
		f(&cfg)
	}
	e := newEnvWith(t, r, cfg)
	sub := e.submit(tokA, exampleJob(t))
	if sub.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", sub.code, sub.body)
	}
	le := &logEnv{env: e, cluster: cl, ctl: ctl, job: sub.job(t)}
	if err := cl.Scale(context.Background(), le.job, 2, "test"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ws, _ := cl.Workers(context.Background(), le.job.ID)
		ready := len(ws) == 2
		for _, w := range ws {
			b, _ := os.ReadFile(local.LogPath(logDir, le.job.ID, w.ID, "stdout"))
			ready = ready && strings.Count(string(b), "\n") == 3
		}
		if ready {
			le.ids = []string{ws[0].ID, ws[1].ID}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers never wrote their lines: %+v", ws)
		}
		time.Sleep(20 * time.Millisecond)
	}
	k := coord.NewKeys(r.Prefix, le.job.ID)
	g, _ := json.Marshal(coord.Generation{Number: 4, Members: []string{le.ids[1], le.ids[0]}, Addrs: []string{"a", "b"}})
	m, _ := json.Marshal(coord.Member{ID: le.ids[1], State: coord.Active})
	ctx := context.Background()
	if err := r.Client.Set(ctx, k.Gen(), g, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.HSet(ctx, k.Members(), le.ids[1], m).Err(); err != nil {
		t.Fatal(err)
	}
	return le
}

func (le *logEnv) release(t *testing.T, index int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(le.ctl, "go-"+string(rune('0'+index))), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWorkersRoute(t *testing.T) {
	le := newLogEnv(t)
	r := le.get("/v1/jobs/"+le.job.ID+"/workers", tokA)
	if r.code != http.StatusOK {
		t.Fatalf("workers: %d %s", r.code, r.body)
	}
	var list api.WorkerList
	r.json(t, &list)
	if list.Generation != 4 || len(list.Workers) != 2 {
		t.Fatalf("list %+v, want generation 4 and 2 workers", list)
	}
	w0, w1 := list.Workers[0], list.Workers[1]
	if w0.ID != le.ids[0] || w0.Index != 0 || w0.Rank != 1 || w0.Generation != 4 || w0.Node != "local" || w0.State != jobs.WorkerRunning || w0.Started == nil || w0.ExitCode != nil {
		t.Errorf("worker 0: %+v", w0)
	}
	if w1.Rank != 0 || w1.MemberState != "active" || w0.MemberState != "" {
		t.Errorf("worker 1: %+v (worker 0 member state %q)", w1, w0.MemberState)
	}
	for _, field := range []string{`"id"`, `"rank"`, `"generation"`, `"node"`, `"state"`, `"started"`} {
		if !strings.Contains(string(r.body), field) {
			t.Errorf("body lacks %s: %s", field, r.body)
		}
	}
	// Finished: exit code shown, rank kept from the generation.
	le.release(t, 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		le.get("/v1/jobs/"+le.job.ID+"/workers", tokA).json(t, &list)
		if list.Workers[0].ExitCode != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exit code never shown: %+v", list.Workers[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if *list.Workers[0].ExitCode != 0 || list.Workers[0].State != jobs.WorkerComplete {
		t.Errorf("finished worker: %+v", list.Workers[0])
	}
	le.get("/v1/jobs/"+le.job.ID+"/workers", tokB).problem(t, http.StatusNotFound, api.ProblemNotFound)
	le.get("/v1/jobs/j-nope/workers", tokA).problem(t, http.StatusNotFound, api.ProblemNotFound)
}

func TestLogsRoute(t *testing.T) {
	le := newLogEnv(t)
	base := "/v1/jobs/" + le.job.ID + "/logs"
	r := le.get(base+"?worker="+le.ids[0], tokA)
	if r.code != http.StatusOK || string(r.body) != "w0 line 1\nw0 line 2\nw0 line 3\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("stdout of w0: %d %q %s", r.code, r.body, r.header.Get("Content-Type"))
	}
	if r.header.Get("X-Edl-Worker") != le.ids[0] {
		t.Errorf("X-Edl-Worker %q", r.header.Get("X-Edl-Worker"))
	}
	if r := le.get(base+"?worker="+le.ids[0]+"&stream=stderr", tokA); string(r.body) != "w0 oops\n" {
		t.Errorf("stderr = %q", r.body)
	}
	if r := le.get(base+"?worker="+le.ids[0]+"&tail=2", tokA); string(r.body) != "w0 line 2\nw0 line 3\n" {
		t.Errorf("tail 2 = %q", r.body)
	}
	// No worker: rank 0 of the generation, which is worker index 1.
	if r := le.get(base+"?tail=1", tokA); r.header.Get("X-Edl-Worker") != le.ids[1] || string(r.body) != "w1 line 3\n" {
		t.Errorf("default worker: %s %q, want rank 0 = %s", r.header.Get("X-Edl-Worker"), r.body, le.ids[1])
	}
	for _, tc := range []struct{ query, field string }{
		{"stream=both", "stream"}, {"tail=-1", "tail"}, {"tail=x", "tail"}, {"tail=100001", "tail"},
		{"follow=maybe", "follow"}, {"worker=a/b", "worker"},
	} {
		p := le.get(base+"?"+tc.query, tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
			t.Errorf("%s: errors %+v, want field %s", tc.query, p.Errors, tc.field)
		}
	}
	le.get(base+"?worker="+le.ids[0], tokB).problem(t, http.StatusNotFound, api.ProblemNotFound)
	le.get(base+"?worker=nobody", tokA).problem(t, http.StatusNotFound, api.ProblemNotFound)
	le.get("/v1/jobs/j-nope/logs", tokA).problem(t, http.StatusNotFound, api.ProblemNotFound)
}

func TestLogsFollow(t *testing.T) {
	le := newLogEnv(t)
	base := le.url + "/v1/jobs/" + le.job.ID + "/logs?worker=" + le.ids[0]
	get := func(url, accept string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+tokA)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	plain := get(base+"&follow=true&tail=1", "")
	sse := get(base+"&tail=1", "text/event-stream")
	if ct := sse.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("SSE content type %q", ct)
	}
	br := bufio.NewReader(plain.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "w0 line 3\n" {
		t.Fatalf("first followed line %q, %v", line, err)
	}
	le.release(t, 0) // w0 writes "bye" and exits: both streams must end
	done := make(chan string, 2)
	go func() { rest, _ := io.ReadAll(br); done <- string(rest) }()
	go func() { b, _ := io.ReadAll(sse.Body); done <- string(b) }()
	var got []string
	for range 2 {
		select {
		case s := <-done:
			got = append(got, s)
		case <-time.After(10 * time.Second):
			t.Fatal("a followed log did not end after the worker exited")
		}
	}
	var rest, events string
	for _, s := range got {
		if strings.Contains(s, "event:") {
			events = s
		} else {
			rest = s
		}
	}
	if rest != "w0 bye\n" {
		t.Errorf("plain follow rest %q, want the line written later", rest)
	}
	if !strings.Contains(events, "event: log\ndata: w0 line 3\n\n") || !strings.Contains(events, "event: log\ndata: w0 bye\n\n") ||
		!strings.HasSuffix(events, "event: end\ndata: {}\n\n") {
		t.Errorf("SSE stream %q", events)
	}
}

func TestLogsWithoutSource(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	e.get("/v1/jobs/"+j.ID+"/logs", tokA).problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
	e.get("/v1/jobs/"+j.ID+"/workers", tokA).problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
}

// TestLogsOfAFinishedJob: once the job is torn down and its workers gone,
// they are still listed (finished, with exit codes and their rank in the
// last generation), a named worker's log is served, and without worker=
// the log of rank 0 of the last generation (was: no workers, and 404).
func TestLogsOfAFinishedJob(t *testing.T) {
	le := newLogEnv(t)
	if err := le.cluster.Teardown(context.Background(), le.job.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ws, _ := le.cluster.Workers(context.Background(), le.job.ID)
		if len(ws) == 2 && !ws[0].State.Live() && !ws[1].State.Live() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers still live: %+v", ws)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var list api.WorkerList
	le.get("/v1/jobs/"+le.job.ID+"/workers", tokA).json(t, &list)
	if len(list.Workers) != 2 || list.Generation != 4 {
		t.Fatalf("finished job's workers: %+v", list)
	}
	for i, w := range list.Workers {
		if w.ID != le.ids[i] || w.ExitCode == nil || w.State.Live() || w.Started == nil || w.Rank != 1-i || w.Generation != 4 {
			t.Errorf("finished worker %d: %+v", i, w)
		}
	}
	base := "/v1/jobs/" + le.job.ID + "/logs"
	if r := le.get(base+"?worker="+le.ids[1]+"&tail=1", tokA); r.code != http.StatusOK || string(r.body) != "w1 line 3\n" {
		t.Errorf("finished worker's log: %d %q", r.code, r.body)
	}
	r := le.get(base, tokA)
	if r.code != http.StatusOK || r.header.Get("X-Edl-Worker") != le.ids[1] || string(r.body) != "w1 line 1\nw1 line 2\nw1 line 3\n" {
		t.Errorf("default log of the finished job: %d %s %q, want rank 0's (%s)", r.code, r.header.Get("X-Edl-Worker"), r.body, le.ids[1])
	}
	if r := le.get(base+"?stream=stderr", tokA); r.code != http.StatusOK || string(r.body) != "w1 oops\n" {
		t.Errorf("default stderr of the finished job: %d %q", r.code, r.body)
	}
	le.get(base+"?worker="+le.ids[1], tokB).problem(t, http.StatusNotFound, api.ProblemNotFound)
	le.get("/v1/jobs/"+le.job.ID+"/workers", tokB).problem(t, http.StatusNotFound, api.ProblemNotFound)
}

// A followed log holds a connection and an open file (on Nomad a log
// stream) until the worker exits, which may be never: followed logs count
// against the tenant's stream cap with event streams, and are 429 past it.
func TestLogFollowsCountAsStreams(t *testing.T) {
	le := newLogEnv(t, func(c *api.Config) { c.MaxStreamsPerTenant = 2 })
	logs := le.url + "/v1/jobs/" + le.job.ID + "/logs?worker=" + le.ids[0]
	open := func(url, accept string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+tokA)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := open(logs+"&follow=true", "")
	second := open(logs, "text/event-stream")
	if first.StatusCode != 200 || second.StatusCode != 200 {
		t.Fatalf("follows within the cap: %d %d", first.StatusCode, second.StatusCode)
	}
	for _, third := range []*http.Response{open(logs+"&follow=true", ""), open(le.url+"/v1/jobs/"+le.job.ID+"/events?follow=true", "")} {
		if third.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s past the cap: %d, want 429", third.Request.URL, third.StatusCode)
		}
		b, _ := io.ReadAll(third.Body)
		reply{code: third.StatusCode, header: third.Header, body: b}.problem(t, http.StatusTooManyRequests, api.ProblemTooManyStreams)
		if third.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	// The log without follow is no stream; another tenant has its own cap.
	if g := le.get("/v1/jobs/"+le.job.ID+"/logs?worker="+le.ids[0], tokA); g.code != 200 {
		t.Errorf("log without follow at the cap: %d %s", g.code, g.body)
	}
	// The worker exits: its followed logs end and give their places back.
	le.release(t, 0)
	io.Copy(io.Discard, first.Body)
	io.Copy(io.Discard, second.Body)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := open(logs+"&follow=true", "")
		if r.StatusCode == 200 {
			break
		}
		r.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("ended follows did not free their places: %d", r.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that leaves a followed SSE log while the worker still runs: the
// handler closed the log reader while its line-reading goroutine was still
// in Read (a data race on the reader's files; -race reports it). The
// reader is stopped and waited for before it is closed.
func TestLogSSEClientLeaves(t *testing.T) {
	le := newLogEnv(t)
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, le.url+"/v1/jobs/"+le.job.ID+"/logs?worker="+le.ids[0], nil)
		req.Header.Set("Authorization", "Bearer "+tokA)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before its first line: %v", err)
			}
			if strings.HasPrefix(line, "data: w0 line") {
				break
			}
		}
		resp.Body.Close()                  // the worker still waits: the stream would go on
		time.Sleep(300 * time.Millisecond) // a few polls of the log file
	}
	// The server still serves the log, and the places were given back.
	if g := le.get("/v1/jobs/"+le.job.ID+"/logs?worker="+le.ids[0], tokA); g.code != 200 || !strings.Contains(string(g.body), "w0 line 3") {
		t.Errorf("log after the clients left: %d %s", g.code, g.body)
	}
}

// The logs of a job that has not started a worker were 404 "the job has
// no workers now", telling the client to name one with ?worker= "(its ID
// is in the job's events)": a pending job's events name none. It says the
// job has not started a worker yet now.
func TestLogsOfAJobNotStarted(t *testing.T) {
	cl, err := local.New(local.Config{Command: []string{"/bin/true"}, WorkerArgs: func(jobs.Job, int, string) []string { return nil },
		LogDir: t.TempDir(), Slots: 1, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	e := newEnvWith(t, testenv.NewRedis(t), api.Config{Workers: cl, Logs: cl})
	j := e.submit(tokA, exampleJob(t)).job(t)
	for _, q := range []string{"", "?follow=true"} {
		p := e.get("/v1/jobs/"+j.ID+"/logs"+q, tokA).problem(t, http.StatusNotFound, api.ProblemNotFound)
		if !strings.Contains(p.Title, "not started") || strings.Contains(p.Detail, "?worker=") {
			t.Errorf("logs%s of a pending job: %q / %q, want it to say the job has not started a worker, not to name one", q, p.Title, p.Detail)
		}
	}
}
