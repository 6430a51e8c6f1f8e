package api_test

import (
	"net/http"
	"strings"
	"testing"
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
