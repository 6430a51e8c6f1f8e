package main

import (
	"flag"
	"time"

	"github.com/edl-nomad/edl/api"
)

// addAPIFlags registers the API's hardening flags (edl serve and edl dev
// alike) into cfg.
func addAPIFlags(fs *flag.FlagSet, cfg *api.Config) {
	d := api.DefaultConfig()
	fs.IntVar(&cfg.MaxStreamsPerTenant, "max-streams-per-tenant", d.MaxStreamsPerTenant,
		"event streams (events?follow=true) one tenant may hold open in this process; more get 429")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", d.BodyReadTimeout,
		"time a request has to send its whole body; slower ones get 408 (event streams are not affected)")
}

func checkAPIFlags(cmd string, cfg api.Config) error {
	if cfg.MaxStreamsPerTenant < 1 {
		return usageErrorf("%s: --max-streams-per-tenant %d: must be at least 1", cmd, cfg.MaxStreamsPerTenant)
	}
	if cfg.BodyReadTimeout <= 0 || cfg.BodyReadTimeout > time.Hour {
		return usageErrorf("%s: --body-read-timeout %s: must be positive and at most 1h", cmd, cfg.BodyReadTimeout)
	}
	return nil
}
