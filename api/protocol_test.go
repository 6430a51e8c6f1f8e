package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/api"
)

// HEAD was 405 on every route (echo routes no HEAD), and Allow did not
// name it. A server that has GET has HEAD (RFC 9110 9.3.2): the status and
// headers of the GET, no body; a HEAD of a stream answers as its page.
func TestHeadIsGetWithoutABody(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{"/healthz", "", 200},
		{"/openapi.json", "", 200},
		{"/ui/", "", 200},
		{"/v1/jobs", tokA, 200},
		{"/v1/jobs/" + j.ID, tokA, 200},
		{"/v1/jobs/" + j.ID + "/events?follow=true", tokA, 200},
		{"/v1/jobs/" + j.ID, tokB, 404},
		{"/v1/jobs", "", 401},
	} {
		head := e.do(req{method: http.MethodHead, path: tc.path, token: tc.token})
		get := e.do(req{method: http.MethodGet, path: strings.TrimSuffix(tc.path, "?follow=true"), token: tc.token})
		if head.code != tc.status || get.code != tc.status {
			t.Errorf("HEAD %s: %d (GET %d), want %d", tc.path, head.code, get.code, tc.status)
			continue
		}
		if len(head.body) != 0 {
			t.Errorf("HEAD %s sent a body: %q", tc.path, head.body)
		}
		if h, g := head.header.Get("Content-Type"), get.header.Get("Content-Type"); h != g {
			t.Errorf("HEAD %s: Content-Type %q, GET's %q", tc.path, h, g)
		}
		if cl := head.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(get.body)) {
			t.Errorf("HEAD %s: Content-Length %s, GET's body %d bytes", tc.path, cl, len(get.body))
		}
	}
	if r := e.do(req{method: http.MethodHead, path: "/v1/jobs", token: ""}); r.header.Get("WWW-Authenticate") == "" {
		t.Errorf("HEAD without a token: no WWW-Authenticate")
	}
	// HEAD is allowed where GET is, and only there.
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodOptions, "/v1/jobs", "OPTIONS, GET, POST, HEAD"},
		{http.MethodPut, "/v1/jobs/" + j.ID, "OPTIONS, DELETE, GET, PATCH, HEAD"},
		{http.MethodHead, "/v1/jobs/" + j.ID + "/scale", "OPTIONS, POST"},
	} {
		r := e.do(req{method: tc.method, path: tc.path, token: tokA})
		if got := r.header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
	r := e.do(req{method: http.MethodPut, path: "/v1/jobs", token: tokA})
	r.problem(t, http.StatusMethodNotAllowed, api.ProblemMethodNotAllowed)
}

// A list's filters were taken in any number: status=running repeated
// 70,000 times (a 1 MiB query) made every scanned job compare its state
// with each, and label filters a job can never match (more than it may
// hold, longer than a label) answered an empty page as if none matched.
// Each state counts once; impossible label filters are 400 naming label.
func TestListFiltersBounded(t *testing.T) {
	e := newEnv(t)
	e.submit(tokA, specWith(t, map[string]any{"labels": map[string]string{"team": "a"}})).job(t)
	many := strings.Repeat("status=pending&", 20000) + "label=team=a"
	var l api.JobList
	if r := e.get("/v1/jobs?"+many, tokA); r.code != 200 {
		t.Fatalf("one state repeated: %d %s", r.code, r.body)
	} else if r.json(t, &l); len(l.Jobs) != 1 {
		t.Fatalf("one state repeated: %d jobs, want 1", len(l.Jobs))
	}
	var labels []string
	for i := range 33 {
		labels = append(labels, "label=k"+strconv.Itoa(i)+"=v")
	}
	for name, q := range map[string]string{
		"33 label filters":       strings.Join(labels, "&"),
		"a label value too long": "label=team=" + strings.Repeat("a", 257),
		"a label key too long":   "label=" + strings.Repeat("k", 64) + "=v",
		"an unknown state":       "status=" + strings.Repeat("pending,", 1000) + "pending2",
	} {
		p := e.get("/v1/jobs?"+q, tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
		if len(p.Errors) != 1 || (p.Errors[0].Field != "label" && p.Errors[0].Field != "status") {
			t.Errorf("%s: errors %+v, want the parameter named", name, p.Errors)
		}
	}
}
