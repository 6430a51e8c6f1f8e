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
