package nomadtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fixture reads a recorded body from testdata (copied from
// ../shared/data/nomad, Nomad 1.6.1).
func fixture(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return decode(t, b)
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// envelope is how the recordings store plain-text error answers.
type envelope struct {
	StatusCode  int
	ContentType string
	Body        string
}

func errorFixture(t *testing.T, name string) envelope {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// paths lists every object key path in v ("a.b[].c"), arrays merged.
func paths(v any, prefix string, out map[string]bool, skip map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := prefix + "." + k
			if skipped(p, skip) {
				continue
			}
			out[p] = true
			paths(e, p, out, skip)
		}
	case []any:
		for _, e := range x {
			paths(e, prefix+"[]", out, skip)
		}
	}
}

// skipped reports whether p is, or lies under, a skipped path.
func skipped(p string, skip map[string]bool) bool {
	for s := range skip {
		if p == s || strings.HasPrefix(p, s+".") || strings.HasPrefix(p, s+"[]") {
			return true
		}
	}
	return false
}

// sameShape fails when got and want (a fixture) differ in their key paths.
// Keys under free-form maps are skipped by the caller through skip.
func sameShape(t *testing.T, what string, got, want any, skip ...string) {
	t.Helper()
	sk := map[string]bool{}
	for _, s := range skip {
		sk[s] = true
	}
	g, w := map[string]bool{}, map[string]bool{}
	paths(got, "", g, sk)
	paths(want, "", w, sk)
	var missing, extra []string
	for p := range w {
		if !g[p] {
			missing = append(missing, p)
		}
	}
	for p := range g {
		if !w[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		t.Errorf("%s: shape differs from the recording\nmissing: %v\nextra:   %v", what, missing, extra)
	}
}

// raw does one HTTP request and returns status, content type, body and
// the X-Nomad-Index header.
type rawResp struct {
	status int
	ctype  string
	body   []byte
	index  string
}

func do(t *testing.T, method, url string, body []byte) rawResp {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{resp.StatusCode, resp.Header.Get("Content-Type"), b, resp.Header.Get("X-Nomad-Index")}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allocSummary reduces an allocation list to sorted
// "name desired client description" lines, the part of a recorded sequence
// that does not depend on IDs and times.
func allocSummary(v any) string {
	var lines []string
	for _, e := range v.([]any) {
		m := e.(map[string]any)
		lines = append(lines, fmt.Sprintf("%v %v %v %q next=%v", m["Name"], m["DesiredStatus"], m["ClientStatus"], m["DesiredDescription"], m["NextAllocation"] != ""))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
