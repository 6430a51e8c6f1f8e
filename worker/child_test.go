package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/redis/go-redis/v9"
)

// childEnv is what a worker child process of the multi-process tests
// (cluster.start re-runs the test binary with EDL_WORKER_CHILD set) reads
// from its environment: its config and deps, ready for the mode's
// constructor. code != 0: the setup failed (exit with it). done releases
// what the setup opened (the ring listener).
type childEnv struct {
	Cfg  Config
	Deps Deps
	Env  func(string) string
	Log  *slog.Logger
	Code int
	Done func()
}

// childSetup reads a worker child's environment (see childEnv).
func childSetup() childEnv {
	env := func(k string) string { return os.Getenv("EDL_WORKER_" + k) }
	level := slog.LevelInfo
	if env("DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var spec jobs.Spec
	if err := json.Unmarshal([]byte(env("SPEC")), &spec); err != nil {
		log.Error("bad spec", "err", err)
		return childEnv{Code: 2}
	}
	opts, err := redis.ParseURL(env("REDIS"))
	if err != nil {
		log.Error("bad redis url", "err", err)
		return childEnv{Code: 2}
	}
	opts.MaxRetries = -1
	opts.DialTimeout = 200 * time.Millisecond
	opts.ReadTimeout = time.Second
	rdb := redis.NewClient(opts)
	job, id := env("JOB"), env("ID")
	tr, err := collective.Listen("127.0.0.1:0", job, log)
	if err != nil {
		log.Error("listen", "err", err)
		return childEnv{Code: 1}
	}
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
			return childEnv{Code: 2}
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
			return childEnv{Code: 2}
		}
		deps.Store = st
	}
	return childEnv{Cfg: cfg, Deps: deps, Env: env, Log: log, Done: func() { _ = tr.Close() }}
}

// slowRunning is the real job store whose Running transition takes a
// while, as it does when Redis is slow: the window in which a final
// transition used to overtake it.
type slowRunning struct {
	*jobstore.Store
	delay    time.Duration
	entered  chan struct{} // closed when the Running write starts
	finalErr atomic.Value  // error of the last non-Running transition
}

func (s *slowRunning) Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error) {
	if to == jobs.Running {
		select {
		case <-s.entered:
		default:
			close(s.entered)
		}
		time.Sleep(s.delay)
		return s.Store.Transition(ctx, id, to, reason)
	}
	j, err := s.Store.Transition(ctx, id, to, reason)
	s.finalErr.Store(errBox{err})
	return j, err
}

type errBox struct{ err error }
