package loop

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestCallbackAddressesRefused(t *testing.T) {
	c := NewCallbacks(CallbackConfig{}, nil)
	for _, a := range []string{
		"127.0.0.1", "127.1.2.3", "::1", "0.0.0.0", "::", "169.254.169.254", "fe80::1",
		"10.0.0.1", "172.16.5.4", "192.168.1.1", "fc00::1", "100.64.0.1", "::ffff:127.0.0.1",
		"::ffff:169.254.169.254", "::ffff:10.0.0.1", "224.0.0.1", "ff02::1", "255.255.255.255",
		"64:ff9b::7f00:1", "2002:7f00:1::1", "192.0.2.1",
	} {
		if c.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s allowed without --callback-allow", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"} {
		if !c.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("public %s refused", a)
		}
	}
	allow, err := ParseAllow("127.0.0.0/8, 10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	c = NewCallbacks(CallbackConfig{Allow: allow}, nil)
	for a, want := range map[string]bool{"127.0.0.1": true, "::ffff:127.0.0.1": true, "10.1.2.3": true, "10.1.2.4": false, "::1": false, "169.254.169.254": false} {
		if got := c.Allowed(netip.MustParseAddr(a)); got != want {
			t.Errorf("with allow list, %s allowed = %v, want %v", a, got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "nope", "1.2.3.4/x"} {
		if _, err := ParseAllow(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseAllow(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func callbackJob(url string) jobs.Job {
	return jobs.Job{ID: "j-1", Tenant: "t1", State: jobs.Succeeded, Spec: jobs.Spec{CallbackURL: url}}
}

// Every form of a loopback or otherwise private target is refused at dial
// time, before a byte reaches it.
func TestCallbackToPrivateTargetsRefusedAtDial(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	c := NewCallbacks(CallbackConfig{Attempts: 3, Backoff: time.Millisecond}, nil)
	for _, u := range []string{
		srv.URL, // 127.0.0.1
		"http://localhost:" + port,
		"http://[::ffff:127.0.0.1]:" + port,
		"http://0.0.0.0:" + port,
		"http://[::]:" + port,
		"http://[::1]:" + port,
		"http://169.254.169.254/latest/meta-data/",
	} {
		class, err := c.Notify(context.Background(), callbackJob(u), nil)
		if err == nil || class != ClassRefused {
			t.Errorf("%s: class %q, err %v; want refused", u, class, err)
		}
	}
	for _, u := range []string{"ftp://example.com/x", "http:///nohost", "::not a url"} {
		if class, err := c.Notify(context.Background(), callbackJob(u), nil); err == nil || class != ClassRefused {
			t.Errorf("%s: class %q, err %v; want refused", u, class, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d requests", n)
	}
}

func TestCallbackFollowsNoRedirect(t *testing.T) {
	var inner atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.Add(1) }))
	defer target.Close()
	var outer atomic.Int32
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		outer.Add(1)
		http.Redirect(w, r, target.URL+"/internal", http.StatusFound)
	}))
	defer redir.Close()
	c := NewCallbacks(CallbackConfig{Allow: loopback, Attempts: 3, Backoff: time.Millisecond}, nil)
	class, err := c.Notify(context.Background(), callbackJob(redir.URL), nil)
	if err == nil || class != "3xx" {
		t.Fatalf("redirect: class %q, err %v; want a 3xx refusal", class, err)
	}
	if outer.Load() != 1 || inner.Load() != 0 {
		t.Fatalf("redirect followed or retried: outer %d, target %d; want 1 and 0", outer.Load(), inner.Load())
	}
}

func TestCallbackSignature(t *testing.T) {
	const secret = "0123456789abcdef-tenant-secret"
	now := time.Unix(1700000000, 0)
	var header string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get(HeaderSignature)
		body, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	c := NewCallbacks(CallbackConfig{Allow: loopback, Now: func() time.Time { return now },
		Secret: func(tenant string) string {
			if tenant == "t1" {
				return secret
			}
			return ""
		}}, nil)
	if class, err := c.Notify(context.Background(), callbackJob(srv.URL), nil); err != nil || class != "2xx" {
		t.Fatalf("notify: %q %v", class, err)
	}
	if !strings.HasPrefix(header, "t=1700000000,v1=") {
		t.Fatalf("header %q", header)
	}
	if err := Verify(secret, header, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("verify: %v", err)
	}
	// What a receiver computes: HMAC-SHA256(secret, "<t>." + body), hex.
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("1700000000."))
	m.Write(body)
	if want := "t=1700000000,v1=" + hex.EncodeToString(m.Sum(nil)); header != want {
		t.Fatalf("signature %q, want %q", header, want)
	}
	for name, tc := range map[string]struct {
		secret, header string
		body           []byte
		at             time.Time
	}{
		"other secret": {"another-secret-of-16+", header, body, now},
		"changed body": {secret, header, append([]byte(nil), append(body, ' ')...), now},
		"too old":      {secret, header, body, now.Add(time.Hour)},
		"no signature": {secret, "", body, now},
		"garbled":      {secret, "t=x,v1=", body, now},
		"forged stamp": {secret, strings.Replace(header, "t=1700000000", "t=1700000100", 1), body, now},
	} {
		if err := Verify(tc.secret, tc.header, tc.body, tc.at, 5*time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	// A tenant without a secret gets no signature header.
	j := callbackJob(srv.URL)
	j.Tenant = "t2"
	if _, err := c.Notify(context.Background(), j, nil); err != nil || header != "" {
		t.Fatalf("unsigned tenant: header %q, err %v", header, err)
	}
}

// The tenant sees only the outcome's class in its job's events, never the
// remote's status line or body.
func TestCallbackEventShowsOnlyTheClass(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "internal-banner-v1.2.3")
	}))
	defer srv.Close()
	cl := newFakeCluster(4)
	l, store := newTestLoop(t, cl, func(c *Config) {
		c.Callbacks = NewCallbacks(CallbackConfig{Allow: loopback, Backoff: time.Millisecond}, nil)
	})
	ctx := context.Background()
	spec := exampleSpec(t, 1, 1)
	spec.CallbackURL = srv.URL
	j, _, _ := store.Create(ctx, "t1", spec, "")
	l.Round(ctx)
	store.Transition(ctx, j.ID, jobs.Running, "")
	store.Transition(ctx, j.ID, jobs.Succeeded, "")
	l.Round(ctx)
	waitFor(t, "the callback outcome", func() bool {
		g, _ := store.Get(ctx, j.ID)
		return g.Planner != nil && g.Planner.Finished
	})
	evs, _ := store.Events(ctx, j.ID, "", 100)
	var msg string
	for _, e := range evs {
		if strings.HasPrefix(e.Message, "callback") {
			msg = e.Message
		}
		if strings.Contains(e.Message, "418") || strings.Contains(e.Message, "banner") || strings.Contains(e.Message, "teapot") {
			t.Fatalf("remote answer leaked into an event: %q", e.Message)
		}
	}
	if msg != "callback failed (4xx)" {
		t.Fatalf("callback event = %q, want %q", msg, "callback failed (4xx)")
	}
}
