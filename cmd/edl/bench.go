package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/edl-nomad/edl/internal/bench"
)

// `edl bench` lives in internal/bench; this file only lends it `edl dev`,
// started in this process exactly as the dev command starts it.
func init() {
	register(command{
		name:    "bench",
		summary: bench.Summary,
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return bench.Run(ctx, bench.Env{StartDev: startBenchDev}, args, stdout, stderr)
		},
	})
}

func startBenchDev(ctx context.Context, c bench.DevConfig, log *slog.Logger) (*bench.Dev, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	d, err := startDev(ctx, devConfig{listen: c.Listen, dataDir: c.DataDir, tenants: c.Tenants, slots: c.Slots,
		grace: c.Grace, cooldown: c.Cooldown, interval: c.Interval, workerLogLevel: c.WorkerLogLevel, workerEnv: c.WorkerEnv}, log)
	if err != nil {
		return nil, err
	}
	return &bench.Dev{APIURL: d.apiURL, Tokens: d.tokens, Store: d.store, Cluster: d.cluster, RDB: d.rdb, Redis: d.redis,
		RestartPlanner: d.restartPlanner, Shutdown: d.shutdown}, nil
}
