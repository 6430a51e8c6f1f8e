package checkpoint

import (
	"strings"
	"testing"
)

// TestUploaderConfigValidate: the zero value is valid (defaults); an error names
// the field at fault.
func TestUploaderConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   UploaderConfig
		field string // "" when valid
	}{
		{UploaderConfig{}, ""},
		{UploaderConfig{MaxAttempts: -1}, "MaxAttempts"},
		{UploaderConfig{Backoff: 2, MaxBackoff: 1}, "MaxBackoff"},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v; want valid", tc.cfg, err)
		case tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)):
			t.Errorf("%+v: %v; want an error naming %s", tc.cfg, err, tc.field)
		}
	}
}
