package bench

import (
	"strings"
	"testing"
	"time"
)

// TestDevConfigValidate: what the benchmarks pass is valid; an error names
// the field at fault.
func TestDevConfigValidate(t *testing.T) {
	ok := DevConfig{Listen: "127.0.0.1:0", DataDir: "/tmp/x", Slots: 3, Grace: 10 * time.Second,
		Cooldown: time.Second, Interval: 200 * time.Millisecond, WorkerLogLevel: "warn"}
	with := func(f func(*DevConfig)) DevConfig { c := ok; f(&c); return c }
	cases := []struct {
		cfg   DevConfig
		field string // "" when valid
	}{
		{ok, ""},
		{with(func(c *DevConfig) { c.Cooldown = 0 }), ""},
		{with(func(c *DevConfig) { c.Listen = "" }), "Listen"},
		{with(func(c *DevConfig) { c.DataDir = "" }), "DataDir"},
		{with(func(c *DevConfig) { c.Slots = 0 }), "Slots"},
		{with(func(c *DevConfig) { c.Grace = 0 }), "Grace"},
		{with(func(c *DevConfig) { c.Cooldown = -time.Second }), "Cooldown"},
		{with(func(c *DevConfig) { c.Interval = 0 }), "Interval"},
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
