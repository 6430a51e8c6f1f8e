package main

import (
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

// With --tenants, edl dev's banner named a tenant 'default' and an admin
// 'admin' the file need not have, a tokens.json it never wrote, and a curl
// line with "Bearer (from --tenants)": it names the tenants file now.
func TestDevBannerWithTenantsFile(t *testing.T) {
	var b strings.Builder
	printDevBanner(&b, &devEnv{apiURL: "http://127.0.0.1:1", tenants: "/etc/edl/tenants.yaml", dataDir: "/data", redisURL: "redis://x"})
	out := b.String()
	for _, bad := range []string{"tokens.json", "tenant:   default", "admin:    admin", "(from --tenants)"} {
		if strings.Contains(out, bad) {
			t.Errorf("banner says %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "/etc/edl/tenants.yaml") || !strings.Contains(out, "Bearer $TOKEN") {
		t.Errorf("banner does not name the tenants file and a token to give:\n%s", out)
	}
	// The dev tenants: their tokens and where they are kept.
	b.Reset()
	printDevBanner(&b, &devEnv{apiURL: "http://127.0.0.1:1", tokens: jobs.DevTokens{Default: "tok-d", Admin: "tok-a"}, dataDir: "/data"})
	for _, want := range []string{"token: tok-d", "token: tok-a", "/data/tokens.json", "Bearer tok-d"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dev tenants' banner lacks %q:\n%s", want, b.String())
		}
	}
}
