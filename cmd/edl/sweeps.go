package main

import (
	"context"
	"log/slog"

	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/edl-nomad/edl/planner/sweeploop"
	"github.com/redis/go-redis/v9"
)

// fence is the planner loop in this process as the sweep controller's
// Leader: whichever loop plannerMetrics holds now (edl dev replaces it on
// a simulated takeover); 0 (not planning) before there is one.
func (m *plannerMetrics) Fence() int64 {
	if l := m.loop.Load(); l != nil {
		return l.Fence()
	}
	return 0
}

// startSweeps runs the sweep controller beside the planner loop until ctx
// ends: it plans only while this process's planner holds the lease, so a
// planner that takes over takes the sweeps over with it.
func startSweeps(ctx context.Context, rdb redis.UniversalClient, prefix string, sweeps *sweepstore.Store, store *jobstore.Store, pm *plannerMetrics, log *slog.Logger) error {
	c, err := sweeploop.New(sweeploop.Config{}, sweeps, store, jobmetrics.New(rdb, prefix), pm, log)
	if err != nil {
		return err
	}
	go func() { _ = c.Run(ctx) }()
	return nil
}
