package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/redis/go-redis/v9"
)

// The multi-process tests re-run this test binary as worker processes:
// with EDL_WORKER_CHILD set, TestMain runs one worker instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("EDL_WORKER_CHILD") != "" {
		os.Exit(runChild())
	}
	testenv.Main(m)
}

func runChild() int {
	// First of all: a SIGTERM that arrives while the process starts is a
	// graceful stop too (the randomized test sends some that early).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	env := func(k string) string { return os.Getenv("EDL_WORKER_" + k) }
	level := slog.LevelInfo
	if env("DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var spec jobs.Spec
	if err := json.Unmarshal([]byte(env("SPEC")), &spec); err != nil {
		log.Error("bad spec", "err", err)
		return 2
	}
	opts, err := redis.ParseURL(env("REDIS"))
	if err != nil {
		log.Error("bad redis url", "err", err)
		return 2
	}
	opts.MaxRetries = -1
	opts.DialTimeout = 200 * time.Millisecond
	opts.ReadTimeout = time.Second
	rdb := redis.NewClient(opts)
	job, id := env("JOB"), env("ID")
	tr, err := collective.Listen("127.0.0.1:0", job, log)
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	defer tr.Close()
	cfg := DefaultConfig(job, id)
	cfg.Prefix = env("PREFIX")
	cfg.Lease = 1500 * time.Millisecond
	cfg.Heartbeat = 300 * time.Millisecond
	cfg.ReportWindow = 400 * time.Millisecond
	cfg.RingTimeout = 3 * time.Second
	cfg.JoinTimeout = 20 * time.Second
	cfg.DebugSamples = true
	cfg.DirectHandOver = env("FULL") == ""
	cfg.SaveFile = env("SAVE")
	if d, err := strconv.Atoi(env("DELAY_MS")); err == nil {
		cfg.StepDelay = time.Duration(d) * time.Millisecond
	}
	if v := env("COMPRESSION"); v != "" {
		if cfg.Compression, err = collective.ParseCompression(v); err != nil {
			log.Error("bad compression", "err", err)
			return 2
		}
	}
	deps := Deps{Redis: rdb, Transport: tr, Spec: &spec, Log: log}
	if env("JOBSTORE") != "" {
		store := jobstore.New(rdb, jobstore.Config{Prefix: cfg.Prefix})
		deps.Spec, deps.Jobs = nil, store
		if d, err := strconv.Atoi(env("RUNNING_DELAY_MS")); err == nil {
			// A slow store: the Running write takes this long.
			deps.Jobs = &slowRunning{Store: store, delay: time.Duration(d) * time.Millisecond, entered: make(chan struct{})}
		}
		cfg.ProgressEvery = 50 * time.Millisecond
	}
	if u := env("STORE"); u != "" {
		st, err := checkpoint.Open(context.Background(), u, checkpoint.Options{})
		if err != nil {
			log.Error("open store", "err", err)
			return 2
		}
		deps.Store = st
	}
	if env("LIVE") != "" {
		return runLiveChild(ctx, cfg, deps, env) // liveckpt_test.go
	}
	w, err := New(cfg, deps)
	if err != nil {
		log.Error("new worker", "err", err)
		return 2
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}
