package main

import (
	"flag"
	"strings"
	"time"

	"github.com/edl-nomad/edl/api"
)

// addAPIFlags registers the API's hardening flags (edl serve and edl dev
// alike) into cfg.
func addAPIFlags(fs *flag.FlagSet, cfg *api.Config) {
	d := api.DefaultConfig()
	fs.IntVar(&cfg.MaxStreamsPerTenant, "max-streams-per-tenant", d.MaxStreamsPerTenant,
		"event streams (events?follow=true) and followed logs (logs?follow=true) one tenant may hold open in this process; more get 429")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", d.BodyReadTimeout,
		"time a request has to send its whole body; slower ones get 408 (event streams are not affected)")
	fs.StringVar(&cfg.MetricsToken, "metrics-token", "",
		"bearer token that may read all of /metrics, as an admin tenant's token may; when set, /metrics without a token is 401.\n"+
			"Unset (default): /metrics without a token answers only the series that name no job, tenant or worker")
}

func checkAPIFlags(cmd string, cfg api.Config) error {
	if cfg.MaxStreamsPerTenant < 1 {
		return usageErrorf("%s: --max-streams-per-tenant %d: must be at least 1", cmd, cfg.MaxStreamsPerTenant)
	}
	if t := cfg.MetricsToken; t != "" && (len(t) < 16 || strings.ContainsAny(t, " \t\r\n")) {
		return usageErrorf("%s: --metrics-token: must be at least 16 characters without spaces", cmd)
	}
	if cfg.BodyReadTimeout <= 0 || cfg.BodyReadTimeout > time.Hour {
		return usageErrorf("%s: --body-read-timeout %s: must be positive and at most 1h", cmd, cfg.BodyReadTimeout)
	}
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%s: %v", cmd, err)
	}
	return nil
}
