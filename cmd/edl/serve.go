package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/planner/loop"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

func init() {
	register(command{
		name:    "serve",
		summary: "run the jobs API (and planner) against an existing Redis",
		run:     runServe,
	})
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "Serves the jobs API on --listen, keeping jobs in the Redis at --redis.\nTenants and their tokens (as SHA-256) come from --tenants. At start it reads\nRedis's persistence settings and warns unless appendonly is yes: a job the API\nanswered 201 for is only as durable as Redis makes it.", stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "API address (host:port)")
	redisURL := fs.String("redis", "redis://127.0.0.1:6379", "Redis URL (redis:// or rediss://)")
	tenantsFile := fs.String("tenants", "", "tenants file (YAML), required: tenants with token_sha256, gpu_quota, weight; admins")
	storeURL := fs.String("store", "", "checkpoint store URL (file:// or s3://; credentials from AWS_* variables), handed to workers and served by the checkpoint routes")
	workerRedis := fs.String("worker-redis", "", "Redis URL the workers use (default: --redis, without its password); must be reachable from Nomad clients")
	workerACL := fs.Bool("worker-redis-acl", true, "give each job's workers a Redis ACL user that reaches only that job's keys (needs Redis 6 or newer and a --redis user allowed to manage ACL users); false: workers log in with --worker-redis's own login, which a job's program can read (docs/exec.md, safety)")
	nf := addNomadFlags(fs)
	ef := addServeExecFlags(fs, nf) // exec_flags.go
	prefix := fs.String("prefix", "edl:", "Redis key prefix")
	var level logLevel
	fs.Var(&level, "log-level", "debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log as JSON lines")
	var apiCfg api.Config
	addAPIFlags(fs, &apiCfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkAPIFlags("serve", apiCfg); err != nil {
		return err
	}
	if *tenantsFile == "" {
		return usageErrorf("serve: --tenants is required (see 'edl serve --help')")
	}
	tenants, err := loadTenants(*tenantsFile)
	if err != nil {
		return usageErrorf("serve: --tenants: %v", err)
	}
	opts, err := redis.ParseURL(*redisURL)
	if err != nil {
		return usageErrorf("serve: --redis %q: %v", *redisURL, err)
	}
	log := newLogger(stderr, level.Level, *logJSON)
	rdb := redis.NewClient(apiRedisOptions(opts))
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("serve: Redis at %s (--redis): %w", opts.Addr, err)
	}
	setup := apiSetup{Listen: *listen, Redis: rdb, Prefix: *prefix, Tenants: tenants, Logger: log, Config: apiCfg}
	if *storeURL != "" {
		st, err := checkpoint.Open(ctx, *storeURL, checkpoint.OptionsFromEnv(os.Getenv))
		if err != nil {
			return fmt.Errorf("serve: --store: %w", err)
		}
		setup.Config.Checkpoints = checkpointView{st}
	} else {
		log.Warn("no --store: workers keep no checkpoints, and a job that loses all its workers starts over")
	}
	if *workerRedis == "" {
		*workerRedis = *redisURL
	}
	var acl *loop.WorkerACL
	if *workerACL {
		if acl, err = loop.NewWorkerACL(ctx, rdb, *prefix); errors.Is(err, loop.ErrNoACL) {
			return fmt.Errorf("serve: %w; --worker-redis-acl=false lets workers use --worker-redis's login instead, which every job's program can read", err)
		} else if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if anonymousRedis(ctx, opts) {
			log.Warn("Redis answers clients that give no password (its default user has nopass): a job's program can reach every job anyway; set requirepass or 'ACL SETUSER default off' and give --redis a login")
		}
	} else {
		log.Warn("--worker-redis-acl=false: workers use --worker-redis's login; a job's program that reads it can reach every job in Redis")
	}
	pm := &plannerMetrics{}
	hook, cluster, err := nf.plannerOnNomad(rdb, *prefix, *workerRedis, *storeURL, acl, tenants, pm, log)
	if err != nil {
		return err
	}
	setup.Cluster = cluster
	setup.Metrics = pm
	setup.Config.PlannerRounds = pm.rounds
	if setup.Config.ExecPolicy, err = ef.policy(nomadx.Driver(nf.driver), nf.cfg.Image); err != nil {
		return err
	}
	setup.Config.Workers, setup.Config.Logs = cluster, cluster
	setup.Config.Membership = coord.RedisMembership{Redis: rdb, Prefix: "edl:"} // the workers' default prefix
	return serveAPI(ctx, setup, hook)
}

// apiRedisOptions sizes the pool for the API: requests burst beyond the
// default (10 per CPU); event streams share one reader and hold none.
func apiRedisOptions(o *redis.Options) *redis.Options {
	if o.PoolSize == 0 {
		o.PoolSize = 256
	}
	return o
}

// apiSetup is what serveAPI needs; edl dev and edl serve fill it differently.
type apiSetup struct {
	Listen   string
	Listener net.Listener // when set, used instead of Listen
	Redis    redis.UniversalClient
	Prefix   string
	Tenants  *jobs.Tenants
	Cluster  api.ClusterView // nil: GET /v1/cluster shows no capacity
	Config   api.Config
	Logger   *slog.Logger
	Metrics  *plannerMetrics // nil: no planner in this process
}

// plannerHook runs beside the API with the same store until ctx ends (the
// planner loop); nil runs the API alone.
type plannerHook func(ctx context.Context, store *jobstore.Store) error

// serveAPI checks Redis, builds the store and the API, and serves until ctx
// ends or withPlanner fails; the first part to stop stops the other.
func serveAPI(ctx context.Context, s apiSetup, withPlanner plannerHook) error {
	log := s.Logger
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := s.Redis.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	checkRedisPersistence(ctx, s.Redis, log)
	store := jobstore.New(s.Redis, jobstore.Config{Prefix: s.Prefix})
	s.Config.Sweeps = sweepstore.New(s.Redis, sweepstore.Config{Prefix: s.Prefix})
	srv := api.New(s.Config, store, s.Tenants, s.Cluster, log)
	if s.Metrics != nil {
		s.Metrics.srv.Store(srv)
	}
	ln := s.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", s.Listen); err != nil {
			return fmt.Errorf("--listen %s: %w", s.Listen, err)
		}
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 2)
	parts := 1
	go func() { errc <- srv.Run(ctx, ln) }()
	if withPlanner != nil {
		parts++
		go func() { errc <- withPlanner(ctx, store) }()
	}
	first := <-errc
	stop()
	for i := 1; i < parts; i++ {
		if err := <-errc; first == nil {
			first = err
		}
	}
	return first
}

// checkRedisPersistence warns when Redis could lose jobs it acknowledged:
// appendonly must be yes; appendfsync always loses nothing, everysec up to
// about 2 s of acknowledged writes when Redis dies while an fsync is slow
// (it postpones the AOF write and still answers) or the machine fails, no
// whatever the OS had not written.
func checkRedisPersistence(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	cfg, err := rdb.ConfigGet(ctx, "append*").Result()
	if err != nil {
		log.Warn("cannot read Redis persistence settings (CONFIG GET refused?); make sure appendonly is yes", "err", err)
		return
	}
	aof, fsync := strings.ToLower(cfg["appendonly"]), strings.ToLower(cfg["appendfsync"])
	switch {
	case aof != "yes":
		log.Warn("Redis appendonly is not yes: submitted jobs are lost if Redis restarts; set appendonly yes", "appendonly", aof, "appendfsync", fsync)
	case fsync == "no":
		log.Warn("Redis appendfsync is no: acknowledged jobs can be lost on a crash of the machine; use everysec or always", "appendfsync", fsync)
	case fsync == "everysec":
		log.Info("Redis persistence: appendonly yes, appendfsync everysec (up to about 2 s of acknowledged writes at risk if Redis or the machine dies; always loses none)")
	default:
		log.Info("Redis persistence", "appendonly", aof, "appendfsync", fsync)
	}
}

// anonymousRedis reports whether the Redis at opts answers a client that
// logs in with nothing.
func anonymousRedis(ctx context.Context, opts *redis.Options) bool {
	o := *opts
	o.Username, o.Password, o.MaxRetries = "", "", -1
	c := redis.NewClient(&o)
	defer c.Close()
	return c.Ping(ctx).Err() == nil
}
