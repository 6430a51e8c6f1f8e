package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/api/ui"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/ui", ui.Handler()))
	defer srv.Close()
	tests := []struct {
		path, ctype, body string
		status            int
	}{
		{"/ui/", "text/html", `<script src="app.js"`, 200},
		{"/ui/index.html", "text/html", `id="login-form"`, 200},
		{"/ui/app.js", "javascript", "sessionStorage", 200},
		{"/ui/chart.js", "javascript", "createElementNS", 200},
		{"/ui/sweeps.js", "javascript", "edlSweeps", 200},
		{"/ui/style.css", "text/css", "marker-resize", 200},
		{"/ui/nope.js", "", "", 404},
		{"/ui/../go.mod", "", "", 404},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, tc.ctype) {
				t.Errorf("content type %q, want %s", ct, tc.ctype)
			}
			if !strings.Contains(string(b), tc.body) {
				t.Errorf("body has no %q", tc.body)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("CSP %q", csp)
			}
		})
	}
}
