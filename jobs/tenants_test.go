package jobs

import (
	"errors"
	"strings"
	"testing"
)

func TestParseTenants(t *testing.T) {
	h := HashToken("secret-a")
	good := "tenants:\n  - name: vision\n    token_sha256: " + h + "\n    gpu_quota: 8\n    weight: 2\nadmins:\n  - name: ops\n    token_sha256: " + HashToken("root") + "\n"
	ts, err := ParseTenants([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := ts.Authenticate("secret-a")
	if !ok || v.Name != "vision" || v.GPUQuota != 8 || v.Weight != 2 || v.Admin || v.RatePerS != DefaultRatePerS {
		t.Errorf("vision = %+v %v", v, ok)
	}
	if a, ok := ts.Authenticate("root"); !ok || !a.Admin {
		t.Errorf("admin = %+v %v", a, ok)
	}
	for _, tok := range []string{"", "secret-b", h} {
		if _, ok := ts.Authenticate(tok); ok {
			t.Errorf("token %q accepted", tok)
		}
	}
	bad := []struct{ name, yaml, field string }{
		{"short hash", "tenants:\n  - name: a\n    token_sha256: abc\n", "tenants[0].token_sha256"},
		{"bad name", "tenants:\n  - name: A B\n    token_sha256: " + h + "\n", "tenants[0].name"},
		{"duplicate token", "tenants:\n  - name: a\n    token_sha256: " + h + "\n  - name: b\n    token_sha256: " + h + "\n", "tenants[1].token_sha256"},
		{"empty", "tenants: []\n", "tenants"},
		{"weight NaN", "tenants:\n  - name: a\n    token_sha256: " + h + "\n    weight: .nan\n", "tenants[0].weight"},
		{"weight infinite", "tenants:\n  - name: a\n    token_sha256: " + h + "\n    weight: .inf\n", "tenants[0].weight"},
		{"rate NaN", "tenants:\n  - name: a\n    token_sha256: " + h + "\n    rate_per_s: .nan\n", "tenants[0].rate_per_s"},
		{"burst negative", "tenants:\n  - name: a\n    token_sha256: " + h + "\n    burst: -1\n", "tenants[0].burst"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTenants([]byte(tc.yaml))
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Fields[0].Field != tc.field {
				t.Errorf("want field %s at fault, got %v", tc.field, err)
			}
		})
	}
	if _, err := ParseTenants([]byte("tenants:\n  - name: a\n    token: plain\n")); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("unknown key (plain token) accepted: %v", err)
	}
}

func TestDevTenants(t *testing.T) {
	ts, tok, err := NewDevTenants()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ts.Authenticate(tok.Default)
	a, ok2 := ts.Authenticate(tok.Admin)
	if !ok || !ok2 || d.Name != "default" || d.Admin || a.Name != "admin" || !a.Admin || tok.Default == tok.Admin {
		t.Errorf("dev tenants: %+v %+v", d, a)
	}
}
