package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/edl-nomad/edl/api/apibench"
	"github.com/edl-nomad/edl/local/redisproc"
	"github.com/redis/go-redis/v9"
)

func init() {
	registerBench(benchmark{
		name:    "api",
		summary: "jobs API throughput and latency (submit, get, list) with 64 clients on loopback",
		run:     benchAPI,
	})
}

func benchAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench api", "Starts its own redis-server (appendonly yes, appendfsync everysec) and the API on\nloopback ports, then drives the API with --clients concurrent clients: --duration of\nsubmits (--spec), then of gets of random submitted jobs, then of list pages of 50.", stderr)
	clients := fs.Int("clients", 64, "concurrent HTTP clients")
	duration := fs.Duration("duration", 3*time.Second, "length of each phase")
	specFile := fs.String("spec", "examples/job.json", "job spec to submit")
	asJSON := fs.Bool("json", false, "print one JSON line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *clients < 1 || *duration <= 0 {
		return usageErrorf("bench api: --clients must be >= 1 and --duration positive")
	}
	spec, err := os.ReadFile(*specFile)
	if err != nil {
		return usageErrorf("bench api: --spec: %v", err)
	}
	dir, err := os.MkdirTemp("", "edl-bench-api-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rp, err := redisproc.Start(ctx, dir, redisproc.Options{AppendFsync: "everysec"})
	if err != nil {
		return fmt.Errorf("bench api: %w", err)
	}
	defer rp.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr(), PoolSize: 4 * *clients})
	defer rdb.Close()
	res, err := apibench.Run(ctx, apibench.Config{Redis: rdb, Clients: *clients, Duration: *duration, Spec: spec,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return fmt.Errorf("bench api: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "jobs API, %d clients, %.0f s per phase (%d errors)\n", res.Clients, res.PhaseS, res.Errors)
	fmt.Fprintf(stdout, "  submit  %8.0f /s   p50 %6.2f ms   p99 %6.2f ms\n", res.SubmitPerS, res.SubmitP50Ms, res.SubmitP99Ms)
	fmt.Fprintf(stdout, "  get     %8.0f /s   p50 %6.2f ms   p99 %6.2f ms\n", res.GetPerS, res.GetP50Ms, res.GetP99Ms)
	fmt.Fprintf(stdout, "  list    %8.0f /s   (pages of %d)      p99 %6.2f ms\n", res.ListPerS, res.ListLimit, res.ListP99Ms)
	return nil
}
