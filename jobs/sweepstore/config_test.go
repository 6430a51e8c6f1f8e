package sweepstore

import (
	"strings"
	"testing"
	"time"
)

// TestConfigValidate: the zero value is valid (defaults); an error names
// the field at fault.
func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string // "" when valid
	}{
		{Config{}, ""},
		{Config{Prefix: "x:", IdempotencyTTL: time.Hour, EventsMaxLen: 5}, ""},
		{Config{IdempotencyTTL: -time.Second}, "IdempotencyTTL"},
		{Config{EventsMaxLen: -1}, "EventsMaxLen"},
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
