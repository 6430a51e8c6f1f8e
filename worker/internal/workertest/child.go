package workertest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/redis/go-redis/v9"
)

// ChildEnv is what a worker child process of the multi-process tests
// (Cluster.Start re-runs the test binary with EDL_WORKER_CHILD set) reads
// from its environment: its config and deps, ready for the mode's
// constructor. Code != 0: the setup failed (exit with it). Done releases
// what the setup opened (the ring listener).
type ChildEnv struct {
	Cfg  core.Config
	Deps core.Deps
	Env  func(string) string
	Log  *slog.Logger
	Code int
	Done func()
}

// Main is a mode package's TestMain: with EDL_WORKER_CHILD set the
// process is one worker of a Cluster (run gets its environment and
// returns the exit code), else it runs the package's tests
// (testenv.Main).
func Main(m *testing.M, run func(ctx context.Context, ce ChildEnv) int) {
	if os.Getenv("EDL_WORKER_CHILD") == "" {
		testenv.Main(m)
		return
	}
	// First of all: a SIGTERM that arrives while the process starts is a
	// graceful stop too (the randomized test sends some that early).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	ce := ChildSetup()
	code := ce.Code
	if code == 0 {
		code = run(ctx, ce)
		ce.Done()
	}
	stop()
	os.Exit(code)
}

// ChildSetup reads a worker child's environment (see ChildEnv).
func ChildSetup() ChildEnv {
	env := func(k string) string { return os.Getenv("EDL_WORKER_" + k) }
	level := slog.LevelInfo
	if env("DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var spec jobs.Spec
	if err := json.Unmarshal([]byte(env("SPEC")), &spec); err != nil {
		log.Error("bad spec", "err", err)
		return ChildEnv{Code: 2}
	}
	opts, err := redis.ParseURL(env("REDIS"))
	if err != nil {
		log.Error("bad redis url", "err", err)
		return ChildEnv{Code: 2}
	}
	opts.MaxRetries = -1
	opts.DialTimeout = 200 * time.Millisecond
	opts.ReadTimeout = time.Second
	rdb := redis.NewClient(opts)
	job, id := env("JOB"), env("ID")
	tr, err := collective.Listen("127.0.0.1:0", job, log)
	if err != nil {
		log.Error("listen", "err", err)
		return ChildEnv{Code: 1}
	}
	cfg := core.DefaultConfig(job, id)
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
			return ChildEnv{Code: 2}
		}
	}
	deps := core.Deps{Redis: rdb, Transport: tr, Spec: &spec, Log: log}
	if env("JOBSTORE") != "" {
		store := jobstore.New(rdb, jobstore.Config{Prefix: cfg.Prefix})
		deps.Spec, deps.Jobs = nil, store
		if d, err := strconv.Atoi(env("RUNNING_DELAY_MS")); err == nil {
			// A slow store: the Running write takes this long.
			deps.Jobs = &SlowRunning{Store: store, Delay: time.Duration(d) * time.Millisecond, Entered: make(chan struct{})}
		}
		cfg.ProgressEvery = 50 * time.Millisecond
	}
	if u := env("STORE"); u != "" {
		st, err := checkpoint.Open(context.Background(), u, checkpoint.Options{})
		if err != nil {
			log.Error("open store", "err", err)
			return ChildEnv{Code: 2}
		}
		deps.Store = st
	}
	return ChildEnv{Cfg: cfg, Deps: deps, Env: env, Log: log, Done: func() { _ = tr.Close() }}
}

// SlowRunning is the real job store whose Running transition takes a
// while, as it does when Redis is slow: the window in which a final
// transition used to overtake it.
type SlowRunning struct {
	*jobstore.Store
	Delay    time.Duration
	Entered  chan struct{} // closed when the Running write starts
	FinalErr atomic.Value  // error of the last non-Running transition
}

func (s *SlowRunning) Transition(ctx context.Context, id string, to jobs.State, reason string) (jobs.Job, error) {
	if to == jobs.Running {
		select {
		case <-s.Entered:
		default:
			close(s.Entered)
		}
		time.Sleep(s.Delay)
		return s.Store.Transition(ctx, id, to, reason)
	}
	j, err := s.Store.Transition(ctx, id, to, reason)
	s.FinalErr.Store(ErrBox{err})
	return j, err
}

type ErrBox struct{ Err error }
