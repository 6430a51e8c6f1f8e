package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// hostileEnv points the client at servers of the test's own (no API): a
// client config of its own, no EDL_SERVER or EDL_TOKEN.
func hostileEnv(t *testing.T) {
	t.Helper()
	t.Setenv("EDL_CONFIG", filepath.Join(t.TempDir(), "config.json"))
	t.Setenv("EDL_SERVER", "")
	t.Setenv("EDL_TOKEN", "")
}

func runCLI(args ...string) cliResult {
	var out, errb bytes.Buffer
	code := runMain(args, &out, &errb)
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// A server that redirects to another origin (another port of the same
// host, where Go's client keeps the Authorization header) does not get the
// token sent there; a redirect within the server is still followed.
func TestClientRedirectKeepsTheToken(t *testing.T) {
	hostileEnv(t)
	var mu sync.Mutex
	var leaked []string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jobs":[]}`))
	}))
	defer sink.Close()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/moved/v1/jobs":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jobs":[]}`))
		case strings.HasPrefix(r.URL.Path, "/here/"):
			http.Redirect(w, r, "/moved/"+strings.TrimPrefix(r.URL.Path, "/here/"), http.StatusFound)
		default:
			http.Redirect(w, r, sink.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}
	}))
	defer front.Close()

	spec := specFile(t, map[string]any{"name": "redirected"})
	for _, args := range [][]string{{"ls"}, {"get", "j-abc"}, {"submit", spec}, {"cancel", "j-abc"}} {
		r := runCLI(append(args, "--server", front.URL, "--token", "secret-token")...)
		if r.code != 1 || !strings.Contains(r.stderr, "redirect to "+sink.URL) || !strings.Contains(r.stderr, "--server") {
			t.Errorf("%v: exit %d, stderr %q; want 1 naming the redirect", args, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "is edl dev or edl serve running") {
			t.Errorf("%v: a redirect is not an unreachable server: %s", args, r.stderr)
		}
	}
	mu.Lock()
	if len(leaked) > 0 {
		t.Errorf("the other origin got %q", leaked)
	}
	mu.Unlock()

	r := runCLI("ls", "--server", front.URL+"/here", "--token", "secret-token")
	if r.code != 0 {
		t.Errorf("a redirect within the server: exit %d, %s", r.code, r.stderr)
	}
}
