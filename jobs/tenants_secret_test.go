package jobs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestTenantCallbackSecret(t *testing.T) {
	h := HashToken("tok")
	ts, err := ParseTenants([]byte("tenants:\n  - name: a\n    token_sha256: " + h + "\n    callback_secret: 0123456789abcdef-xyz\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ts.Get("a")
	if a.CallbackSecret != "0123456789abcdef-xyz" {
		t.Fatalf("secret = %q", a.CallbackSecret)
	}
	if b, _ := json.Marshal(a); strings.Contains(string(b), "0123456789abcdef") {
		t.Fatalf("secret shown in JSON: %s", b)
	}
	_, err = ParseTenants([]byte("tenants:\n  - name: a\n    token_sha256: " + h + "\n    callback_secret: short\n"))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "tenants[0].callback_secret" {
		t.Fatalf("short secret: %v, want tenants[0].callback_secret at fault", err)
	}
}
