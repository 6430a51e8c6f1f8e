package api

import (
	"strings"
	"testing"
	"time"
)

// TestConfigValidate: the zero value and the defaults are valid; an error
// names the field at fault.
func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string // "" when valid
	}{
		{Config{}, ""},
		{DefaultConfig(), ""},
		{Config{MetricsToken: "0123456789abcdef"}, ""},
		{Config{MaxBodyBytes: -1}, "MaxBodyBytes"},
		{Config{BodyReadTimeout: -time.Second}, "BodyReadTimeout"},
		{Config{MaxStreamsPerTenant: -1}, "MaxStreamsPerTenant"},
		{Config{WriteTimeout: -time.Second}, "WriteTimeout"},
		{Config{StreamWriteTimeout: -time.Second}, "StreamWriteTimeout"},
		{Config{SSEKeepAlive: -time.Second}, "SSEKeepAlive"},
		{Config{StoreTimeout: -time.Second}, "StoreTimeout"},
		{Config{ShutdownGrace: -time.Second}, "ShutdownGrace"},
		{Config{MetricsToken: "short"}, "MetricsToken"},
		{Config{MetricsToken: "0123456789 abcdef"}, "MetricsToken"},
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
