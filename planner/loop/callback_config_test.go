package loop

import (
	"strings"
	"testing"
)

// TestCallbackConfigValidate: the zero value is valid (defaults); an error names
// the field at fault.
func TestCallbackConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   CallbackConfig
		field string // "" when valid
	}{
		{CallbackConfig{}, ""},
		{CallbackConfig{Attempts: -1}, "Attempts"},
		{CallbackConfig{Timeout: -1}, "Timeout"},
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
