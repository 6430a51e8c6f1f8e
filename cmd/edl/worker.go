package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/gpustat"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/worker"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/redis/go-redis/v9"
)

func init() {
	register(command{
		name:    "worker",
		summary: "run one elastic worker of a job (what each allocation runs)",
		run:     runWorker,
	})
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker", "Runs one worker of --job: joins the job's generations through Redis, trains with the\nbuilt-in trainer over a ring of its peers, and exits 0 when the job ends or on SIGTERM\n(after finishing its step and handing its data back). For an exec job (trainer.kind\n`exec`) it runs the job's program with torchrun's environment instead, restarting it\nat every change of the world (see docs/exec.md).", stderr)
	job := fs.String("job", "", "job id (required)")
	redisURL := fs.String("redis", "redis://127.0.0.1:6379", "Redis URL (coordination and the job store); the login comes from EDL_REDIS_USER and EDL_REDIS_PASSWORD or EDL_REDIS_PASSWORD_FILE, not from here: a command line is readable by every process")
	store := fs.String("store", "", "object store URL for checkpoints: file://DIR or s3://BUCKET/PREFIX (AWS_* variables for S3); empty: no checkpoints")
	listen := fs.String("listen", "127.0.0.1:0", "ring listener address; its port must be reachable by the other workers at this address (or at --advertise)")
	advertise := fs.String("advertise", "", "ring address the other workers dial, host:port or host (the listener's port), when --listen binds 0.0.0.0; default: the listener's address")
	id := fs.String("worker-id", "", "unique worker id (default: $NOMAD_ALLOC_ID on Nomad, else host-pid)")
	prefix := fs.String("prefix", "edl:", "Redis key prefix")
	lease := fs.Duration("lease", 2*time.Second, "heartbeat and leader lease")
	heartbeat := fs.Duration("heartbeat", 400*time.Millisecond, "heartbeat interval (at most half the lease)")
	ringTimeout := fs.Duration("ring-timeout", 5*time.Second, "a stalled ring operation fails after this")
	window := fs.Duration("report-window", 500*time.Millisecond, "how long the leader waits for survivors' reports after a failure")
	direct := fs.Bool("direct-handover", true, "joiners take the root's state from the root alone while the others keep training; false: broadcast the state round the whole new ring at every admission (the old, slower path)")
	debugSamples := fs.Bool("debug-samples", os.Getenv("EDL_DEBUG_SAMPLES") == "1", "record which samples every applied step used (in Redis); default true when $EDL_DEBUG_SAMPLES is 1")
	specFile := fs.String("spec", "", "take the job spec from this JSON file instead of the job store (tests, benchmarks)")
	threads := fs.Int("threads", 1, "goroutines per gradient")
	stepLog := fs.String("step-log", "", "append one line per applied step to this file (benchmarks)")
	minStart := fs.Int("min-start", 0, "ready workers before the first generation (default: the spec's minimum)")
	lastCall := fs.Duration("last-call", 0, "how long ready workers wait for the job's workers still preparing before they start or join together (0: the mode's default, "+worker.ExecLastCall.String()+" for exec jobs, none for the others; negative: no wait)")
	restore := fs.String("restore", "", "start a fresh job from this state file")
	save := fs.String("save", "", "rank 0 writes the training state here when the job stops or ends")
	staticWorld := fs.Int("static-world", 0, "run the fixed-world baseline without Redis with this many ranks (benchmarks)")
	staticRank := fs.Int("static-rank", 0, "this process's rank in the fixed-world baseline")
	staticDir := fs.String("static-dir", "", "rendezvous folder of the fixed-world baseline")
	var ef execFlags
	addExecFlags(fs, &ef)
	var level logLevel
	fs.Var(&level, "log-level", "debug, info, warn or error")
	jsonLogs := fs.Bool("log-json", false, "log as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	handGPUsToCUDA()
	redisUser, redisPass, authErr := workerRedisAuth(os.Getenv)
	if err := hideWorkerSecrets(); err != nil {
		return fmt.Errorf("worker: PR_SET_DUMPABLE: %w", err)
	}
	if authErr != nil {
		return usageErrorf("worker: %v", authErr)
	}
	if *job == "" {
		return usageErrorf("worker: --job is required")
	}
	if *id == "" {
		*id = os.Getenv("NOMAD_ALLOC_ID") // the planner maps it to the allocation
	}
	if *id == "" {
		host, _ := os.Hostname()
		*id = host + "-" + strconv.Itoa(os.Getpid())
	}
	log := newLogger(stderr, level.Level, *jsonLogs)
	var spec *jobs.Spec
	if *specFile != "" {
		b, err := os.ReadFile(*specFile)
		if err != nil {
			return usageErrorf("worker: --spec: %v", err)
		}
		spec = &jobs.Spec{}
		if err := json.Unmarshal(b, spec); err != nil {
			return usageErrorf("worker: --spec %s: %v", *specFile, err)
		}
	}
	cfg := worker.DefaultConfig(*job, *id)
	cfg.Prefix, cfg.Lease, cfg.Heartbeat = *prefix, *lease, *heartbeat
	cfg.RingTimeout, cfg.ReportWindow = *ringTimeout, *window
	cfg.DebugSamples, cfg.Threads, cfg.MinStart, cfg.LastCall = *debugSamples, *threads, *minStart, *lastCall
	cfg.RestoreFile, cfg.SaveFile = *restore, *save
	newRedis := func() (*redis.Client, error) {
		opts, err := redis.ParseURL(*redisURL)
		if err != nil {
			return nil, usageErrorf("worker: --redis %s: %v", redactURL(*redisURL), err)
		}
		if redisUser != "" {
			opts.Username = redisUser
		}
		if redisPass != "" {
			opts.Password = redisPass
		}
		opts.MaxRetries = -1
		opts.DialTimeout = 300 * time.Millisecond
		opts.ReadTimeout = time.Second
		return redis.NewClient(opts), nil
	}
	if *staticWorld == 0 {
		// Exec mode (the user's program) needs no ring listener.
		rdb, err := newRedis()
		if err != nil {
			return err
		}
		defer rdb.Close()
		js, err := jobSpec(ctx, spec, rdb, *prefix, *job)
		if err != nil {
			return err
		}
		if js.Trainer.Kind == jobs.TrainerExec {
			deps := worker.Deps{Redis: rdb, Spec: spec, Log: log}
			if spec == nil {
				deps.Jobs = jobstore.New(rdb, jobstore.Config{Prefix: *prefix, JobScoped: true})
			}
			return runExecWorker(ctx, cfg, deps, ef, *store, *advertise, *listen, stdout, stderr, log)
		}
	}
	tr, err := collective.Listen(*listen, *job, log)
	if err != nil {
		return fmt.Errorf("worker: listen on %s: %w", *listen, err)
	}
	defer tr.Close()
	addr, err := worker.AdvertiseAddr(*advertise, tr.Addr())
	if err != nil {
		return usageErrorf("worker: --advertise: %v", err)
	}
	var steps io.Writer
	if *stepLog != "" {
		f, err := os.OpenFile(*stepLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("worker: --step-log: %w", err)
		}
		defer f.Close()
		steps = f
	}
	if *staticWorld > 0 {
		if spec == nil || *staticDir == "" {
			return usageErrorf("worker: --static-world needs --spec and --static-dir")
		}
		return worker.RunStatic(ctx, worker.StaticConfig{World: *staticWorld, Rank: *staticRank, Dir: *staticDir,
			Spec: *spec, Threads: *threads, Timeout: *ringTimeout, StepLog: steps}, tr)
	}
	rdb, err := newRedis()
	if err != nil {
		return err
	}
	defer rdb.Close()
	cfg.DirectHandOver, cfg.Advertise = *direct, addr
	deps := worker.Deps{Redis: rdb, Transport: tr, Spec: spec, Log: log, StepLog: steps}
	if *store != "" {
		st, err := checkpoint.Open(ctx, *store, checkpoint.OptionsFromEnv(os.Getenv))
		if err != nil {
			return fmt.Errorf("worker: --store: %w", err)
		}
		deps.Store = st
	}
	if spec == nil {
		js := jobstore.New(rdb, jobstore.Config{Prefix: *prefix, JobScoped: true})
		deps.Jobs = js
		// GPU use for /metrics, when the worker holds GPUs and NVML is there.
		go gpustat.Report(ctx, js, *job, *id, gpustat.VisibleGPUs(os.Getenv), 10*time.Second, log)
	}
	w, err := worker.New(cfg, deps)
	if err != nil {
		return usageErrorf("worker: %v", err)
	}
	return w.Run(ctx)
}
