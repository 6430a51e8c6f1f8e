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
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", d.WriteTimeout,
		"time an answer that is not a stream has to be written, from the request's start; a client that reads it slower is cut off")
	fs.DurationVar(&cfg.StreamWriteTimeout, "stream-write-timeout", d.StreamWriteTimeout,
		"time each write of a stream (event streams, logs, model downloads) has to be taken by the client; one that stops reading is dropped")
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
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"write-timeout", cfg.WriteTimeout}, {"stream-write-timeout", cfg.StreamWriteTimeout}} {
		if f.v <= 0 || f.v > time.Hour {
			return usageErrorf("%s: --%s %s: must be positive and at most 1h", cmd, f.name, f.v)
		}
	}
	if err := cfg.Validate(); err != nil {
		return usageErrorf("%s: %v", cmd, err)
	}
	return nil
}
