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

// An answer larger than any of the API's is refused by its size instead of
// read into memory whole; one that is not JSON names its Content-Type; an
// event stream whose event never ends is refused too.
func TestClientRefusesHugeAnswers(t *testing.T) {
	hostileEnv(t)
	old := maxAnswerBytes
	maxAnswerBytes = 1 << 20
	t.Cleanup(func() { maxAnswerBytes = old })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/jobs/j-html":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>sign in</html>"))
		case r.URL.Query().Get("follow") == "true":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("id: 1-0\nevent: state\n"))
			line := []byte("data: " + strings.Repeat(" ", 1<<20) + "\n")
			for i := 0; i < 8; i++ { // 8 MiB of one event, no blank line
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		default: // valid JSON, 2 MiB of it
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jobs":[]` + strings.Repeat(" ", 2<<20) + `}`))
		}
	}))
	defer srv.Close()
	spec := specFile(t, map[string]any{"name": "huge"})
	for _, args := range [][]string{{"ls"}, {"get", "j-abc"}, {"submit", spec}} {
		r := runCLI(append(args, "--server", srv.URL, "--token", "t")...)
		if r.code != 1 || !strings.Contains(r.stderr, "more than 1048576 bytes") {
			t.Errorf("%v: exit %d, stderr %q; want 1 naming the size", args, r.code, r.stderr)
		}
	}
	r := runCLI("get", "j-html", "--server", srv.URL, "--token", "t")
	if r.code != 1 || !strings.Contains(r.stderr, "Content-Type text/html") {
		t.Errorf("an HTML answer: exit %d, stderr %q; want 1 naming its Content-Type", r.code, r.stderr)
	}
	r = runCLI("events", "j-abc", "-f", "--server", srv.URL, "--token", "t")
	if r.code != 1 || !strings.Contains(r.stderr, "over 4194304 bytes") {
		t.Errorf("an endless event: exit %d, stderr %q; want 1 naming the size", r.code, r.stderr)
	}
}
