package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
)

// TestDevConfigValidate: edl dev's defaults are valid; each bad flag is a
// usage error naming it.
func TestDevConfigValidate(t *testing.T) {
	ok := devConfig{slots: 2, grace: 30 * time.Second, stragglerFactor: 2, stragglerRounds: 3,
		callbackAllow: devCallbackAllow, api: api.DefaultConfig()}
	with := func(f func(*devConfig)) devConfig { c := ok; f(&c); return c }
	cases := []struct {
		cfg  devConfig
		flag string // "" when valid
	}{
		{ok, ""},
		{with(func(c *devConfig) { c.stragglerFactor = 0 }), ""},
		{with(func(c *devConfig) { c.slots = 0 }), "--slots"},
		{with(func(c *devConfig) { c.grace = 0 }), "--grace"},
		{with(func(c *devConfig) { c.stragglerFactor = 1 }), "--straggler-factor"},
		{with(func(c *devConfig) { c.stragglerRounds = 0 }), "--straggler-rounds"},
		{with(func(c *devConfig) { c.callbackAllow = "not-a-cidr" }), "--callback-allow"},
		{with(func(c *devConfig) { c.api.MaxStreamsPerTenant = 0 }), "--max-streams-per-tenant"},
		{with(func(c *devConfig) { c.api.MetricsToken = "short" }), "--metrics-token"},
		{with(func(c *devConfig) { c.api.WriteTimeout = 0 }), "--write-timeout"},
		{with(func(c *devConfig) { c.api.StreamWriteTimeout = -time.Second }), "--stream-write-timeout"},
		{with(func(c *devConfig) { c.api.StreamWriteTimeout = 2 * time.Hour }), "--stream-write-timeout"},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		switch {
		case tc.flag == "" && err != nil:
			t.Errorf("%+v: %v; want valid", tc.cfg, err)
		case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag)):
			t.Errorf("%+v: %v; want an error naming %s", tc.cfg, err, tc.flag)
		case err != nil && exitCode(err, io.Discard) != exitUsage:
			t.Errorf("%+v: %v is not a usage error", tc.cfg, err)
		}
	}
}
