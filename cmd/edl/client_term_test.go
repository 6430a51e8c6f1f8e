package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// evil holds what a hostile program or server may put in metadata: OSC 0
// (retitle the window), ED (clear the screen), OSC 52 (write the clipboard),
// a CR that would overwrite the line, C1 CSI and a lone 0x9b byte.
const evil = "x\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\r\u009b31m"

// The CLI printed what the server sends as is: a job's name, labels and
// reason, event messages, problem titles and details reached the terminal
// with their escape sequences. Every verb that prints them as text now
// shows each control character (^[, ^G, ^M, \u009b); -o json stays the
// server's JSON, byte for byte; edl logs prints the program's bytes as
// they are (documented).
func TestClientShowsControlCharacters(t *testing.T) {
	hostileEnv(t)
	now := time.Now().UTC()
	job := jobs.Job{ID: "j-evil1", Tenant: "default", State: jobs.Failed, Reason: "exit 1: " + evil + "\nTraceback\tline",
		Spec: jobs.Spec{Name: "n" + evil, Labels: map[string]string{"k" + evil: "v" + evil}}, CreatedAt: now, UpdatedAt: now}
	jobJSON, _ := json.Marshal(job)
	ev := jobs.Event{ID: "1-0", Type: jobs.EventError, Message: "m" + evil, Time: now, Data: map[string]any{"reason": evil}}
	evJSON, _ := json.Marshal(ev)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/jobs":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jobs":[%s]}`, jobJSON)
		case r.URL.Path == "/v1/jobs/j-evil1":
			w.Header().Set("Content-Type", "application/json")
			w.Write(jobJSON)
		case r.URL.Path == "/v1/jobs/j-evil1/events" && r.URL.Query().Get("follow") == "true":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: 1-0\nevent: error\ndata: %s\n\n", evJSON)
			st, _ := json.Marshal(jobs.Event{ID: "2-0", Type: jobs.EventState, Message: "failed " + evil, Time: now, Data: map[string]any{"to": "failed"}})
			fmt.Fprintf(w, "id: 2-0\nevent: state\ndata: %s\n\n", st)
		case r.URL.Path == "/v1/jobs/j-evil1/events":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"events":[%s],"next":"1-0"}`, evJSON)
		case r.URL.Path == "/v1/jobs/j-evil1/logs":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "log "+evil+"\n")
		case r.URL.Path == "/v1/jobs/j-text":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<h1>bad gateway "+evil+"</h1>")
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			b, _ := json.Marshal(map[string]any{"type": "urn:edl:problem:not-found", "title": "t" + evil, "status": 404,
				"detail": "d" + evil, "errors": []map[string]string{{"field": "f" + evil, "reason": "r" + evil}}})
			w.Write(b)
		}
	}))
	defer srv.Close()
	clean := func(t *testing.T, what, out string) {
		t.Helper()
		if strings.ContainsAny(out, "\x1b\x07\r\u009b") || strings.Contains(out, "\x9b") {
			t.Errorf("%s: a control character reached the output: %q", what, out)
		}
		if !strings.Contains(out, "^[]0;pwned^G^[[2J") {
			t.Errorf("%s: %q does not show the escapes", what, out)
		}
	}
	for _, args := range [][]string{
		{"ls"}, {"get", "j-evil1"}, {"events", "j-evil1"}, {"events", "j-evil1", "-f"}, {"watch", "j-evil1"},
	} {
		r := runCLI(append(args, "--server", srv.URL, "--token", "tok")...)
		clean(t, strings.Join(args, " ")+" stdout", r.stdout)
		if strings.ContainsAny(r.stderr, "\x1b\x07") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
	// A reason's newlines are kept (a traceback stays readable).
	if r := runCLI("get", "j-evil1", "--server", srv.URL, "--token", "tok"); !strings.Contains(r.stdout, "\nTraceback") {
		t.Errorf("get: %q lost the reason's newline", r.stdout)
	}
	// Problems, and a body that was not JSON, on stderr.
	for _, id := range []string{"j-missing", "j-text"} {
		r := runCLI("get", id, "--server", srv.URL, "--token", "tok")
		if r.code != exitAPIError {
			t.Errorf("get %s: exit %d", id, r.code)
		}
		clean(t, "get "+id+" stderr", r.stderr)
	}
	// -o json is the server's JSON, exact.
	r := runCLI("get", "j-evil1", "-o", "json", "--server", srv.URL, "--token", "tok")
	if r.stdout != string(jobJSON) {
		t.Errorf("get -o json: %q, want the server's %q", r.stdout, jobJSON)
	}
	r = runCLI("events", "j-evil1", "-o", "json", "--server", srv.URL, "--token", "tok")
	if strings.TrimSpace(r.stdout) != string(evJSON) {
		t.Errorf("events -o json: %q, want %q", r.stdout, evJSON)
	}
	var list struct{ Jobs []jobs.Job }
	r = runCLI("ls", "-o", "json", "--server", srv.URL, "--token", "tok")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Jobs) != 1 || list.Jobs[0].Reason != job.Reason || list.Jobs[0].Spec.Labels["k"+evil] != "v"+evil {
		t.Errorf("ls -o json: %v %q", err, r.stdout)
	}
	// edl logs: the program's bytes as they are.
	if r := runCLI("logs", "j-evil1", "--server", srv.URL, "--token", "tok"); r.stdout != "log "+evil+"\n" {
		t.Errorf("logs: %q, want the raw bytes", r.stdout)
	}
}

func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain ü 日本":        "plain ü 日本",
		"a\nb\tc":           "a\nb\tc",
		"\x1b[2J\x07\r\x00": "^[[2J^G^M^@",
		"\x7f":              "^?",
		"\u0085\u009b":      `\u0085\u009b`,
		"bad \x9b byte":     `bad \x9b byte`,
	} {
		if got := termSafe(in); got != want {
			t.Errorf("termSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
