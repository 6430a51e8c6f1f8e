package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweepstore"
	"github.com/edl-nomad/edl/local"
	"github.com/edl-nomad/edl/local/redisproc"
	"github.com/edl-nomad/edl/planner/loop"
	"github.com/redis/go-redis/v9"
)

func init() {
	register(command{
		name:    "dev",
		summary: "run everything on this machine: Redis child, API, planner, local workers",
		run:     runDev,
	})
}

// devConfig is what `edl dev` is started with.
type devConfig struct {
	listen, dataDir, tenants, store string
	slots                           int
	grace, cooldown, interval       time.Duration
	workerLogLevel                  string
	stragglerFactor                 float64
	stragglerRounds                 int
	callbackAllow                   string
	api                             api.Config
	workerEnv                       []string // added to each worker's environment (edl bench chaos: EDL_DEBUG_SAMPLES)
	redisSupervise                  redisproc.SuperviseOptions
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev", "Runs edl on this machine with no Nomad: a child redis-server on a free loopback port,\nthe API and the planner, and a local cluster that runs `edl worker` processes here\n(one per GPU found through NVML, else --slots CPU slots). Ctrl-C stops all of it.", stderr)
	var c devConfig
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "API address")
	fs.StringVar(&c.dataDir, "data-dir", ".edl", "state: Redis data, checkpoints, worker logs, exec programs' folders (exec/<job>/<worker>), tokens.json")
	fs.StringVar(&c.tenants, "tenants", "", "tenants file (YAML); default: a tenant 'default' and an admin with tokens in <data-dir>/tokens.json")
	fs.StringVar(&c.store, "store", "", "checkpoint store URL (default file://<data-dir>/store)")
	fs.IntVar(&c.slots, "slots", runtime.NumCPU(), "CPU worker slots when there is no GPU")
	fs.DurationVar(&c.grace, "grace", 30*time.Second, "time a stopped worker gets between SIGTERM and SIGKILL")
	fs.DurationVar(&c.cooldown, "planner-cooldown", 10*time.Second, "how long after a resize the planner leaves a job's size alone")
	fs.DurationVar(&c.interval, "planner-interval", time.Second, "planner round interval when nothing happens")
	fs.StringVar(&c.workerLogLevel, "worker-log-level", "info", "log level of the worker processes")
	addStragglerFlags(fs, &c.stragglerFactor, &c.stragglerRounds)
	addCallbackFlags(fs, &c.callbackAllow, devCallbackAllow)
	addAPIFlags(fs, &c.api)
	var level logLevel
	fs.Var(&level, "log-level", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	log := newLogger(stderr, level.Level, false)
	d, err := startDev(ctx, c, log)
	if err != nil {
		return err
	}
	printDevBanner(stdout, d)
	if d.tokens.Default != "" { // dev tenants (not --tenants): let the client verbs in
		if err := writeDevClientConfig(stdout, d.apiURL, d.tokens.Default, d.tokens.Admin); err != nil {
			log.Warn("client config not written", "err", err)
		}
	}
	return d.wait(ctx)
}

// Validate names the flag at fault (a usage error).
func (c devConfig) Validate() error {
	if c.slots < 1 {
		return usageErrorf("dev: --slots %d: must be at least 1", c.slots)
	}
	if c.grace <= 0 {
		return usageErrorf("dev: --grace %s: must be positive", c.grace)
	}
	if err := checkStragglerFlags("dev", c.stragglerFactor, c.stragglerRounds); err != nil {
		return err
	}
	if _, err := loop.ParseAllow(c.callbackAllow); err != nil {
		return usageErrorf("dev: --callback-allow: %v", err)
	}
	return checkAPIFlags("dev", c.api)
}

// devEnv is a running `edl dev`: everything it started, to stop in order.
type devEnv struct {
	redis    *redisproc.Supervised
	redisURL string // with the password: the banner's, for the developer
	rdb      *redis.Client
	store    *jobstore.Store
	cluster  *local.Cluster
	loop     *loop.Loop
	planner  plannerRun // the loop's goroutine, restartable (dev_planner.go)
	apiURL   string
	tokens   jobs.DevTokens
	tenants  string // --tenants: the tenants file, whose tokens the banner cannot show
	dataDir  string
	grace    time.Duration
	errc     chan error
	apiDone  chan struct{} // closed when the API's Run returned
	stop     context.CancelFunc
	lock     *os.File // --data-dir's lock (dev_lock.go), released last
}

// startDev brings up Redis, the store, the local cluster, the planner and
// the API; on error it stops what it had started.
func startDev(parent context.Context, c devConfig, log *slog.Logger) (_ *devEnv, err error) {
	dataDir, err := filepath.Abs(c.dataDir)
	if err != nil {
		return nil, fmt.Errorf("dev: --data-dir: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("dev: --data-dir %s: %w", dataDir, err)
	}
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(parent)
	d := &devEnv{dataDir: dataDir, grace: c.grace, errc: make(chan error, 2), stop: stop, lock: lock}
	defer func() {
		if err != nil {
			d.shutdown()
		}
	}()
	// Supervised: a dead child is started again on the same port and data
	// (AOF), and if it cannot be, wait ends edl dev: it never serves on
	// without its store. appendfsync always: with everysec Redis postpones
	// the AOF write (up to 2 s) while a background fsync is slow and still
	// answers, so a killed child lost a job the API had acknowledged
	// (TestDevRestartsItsRedis, once in CI on a busy disk).
	// A password (the default user's, for the API and the planner), so
	// that a job's program, which can reach the loopback port, gets
	// nowhere without its workers' per-job ACL user.
	pw, err := randomHex(32)
	if err != nil {
		return d, fmt.Errorf("dev: %w", err)
	}
	if d.redis, err = redisproc.StartSupervised(ctx, filepath.Join(dataDir, "redis"), redisproc.Options{AppendFsync: "always", Password: pw}, c.redisSupervise, log); err != nil {
		return d, fmt.Errorf("dev: %w", err)
	}
	d.redisURL = "redis://:" + pw + "@" + d.redis.Addr()
	log.Info("redis-server started", "addr", d.redis.Addr(), "pid", d.redis.Pid())
	d.rdb = redis.NewClient(apiRedisOptions(&redis.Options{Addr: d.redis.Addr(), Password: pw}))
	acl, err := loop.NewWorkerACL(ctx, d.rdb, "edl:")
	if err != nil {
		return d, fmt.Errorf("dev: %w", err)
	}
	d.tenants = c.tenants
	tenants, err := devTenants(c.tenants, dataDir, &d.tokens)
	if err != nil {
		return d, err
	}
	d.store = jobstore.New(d.rdb, jobstore.Config{})
	storeURL := c.store
	if storeURL == "" {
		storeURL = "file://" + filepath.Join(dataDir, "store")
	}
	ckStore, err := checkpoint.Open(ctx, storeURL, checkpoint.OptionsFromEnv(os.Getenv))
	if err != nil {
		return d, fmt.Errorf("dev: --store: %w", err)
	}
	gpus, gerr := local.DiscoverGPUs()
	switch {
	case errors.Is(gerr, local.ErrNoNVML):
		log.Info("no NVML on this machine: CPU workers only", "slots", c.slots)
	case gerr != nil:
		log.Warn("NVML: could not list GPUs; CPU workers only", "err", gerr)
	default:
		log.Info("GPUs found through NVML", "count", len(gpus))
	}
	exe, err := os.Executable()
	if err != nil {
		return d, fmt.Errorf("dev: find the edl binary: %w", err)
	}
	redisURL := d.redis.URL()
	d.cluster, err = local.New(local.Config{
		Command: []string{exe, "worker"},
		WorkerArgs: func(job jobs.Job, index int, id string) []string {
			return []string{"--job", job.ID, "--redis", redisURL, "--store", storeURL,
				"--worker-id", id, "--listen", "127.0.0.1:0", "--log-level", c.workerLogLevel,
				"--exec-dir", filepath.Join(dataDir, "exec", job.ID, id)}
		},
		JobDir:    func(jobID string) string { return filepath.Join(dataDir, "exec", jobID) },
		Env:       c.workerEnv,
		RedisAuth: acl.Credentials,
		LogDir:    filepath.Join(dataDir, "workers"),
		Slots:     c.slots,
		GPUs:      gpus,
		Grace:     c.grace,
		Logger:    log,
	})
	if err != nil {
		return d, fmt.Errorf("dev: %w", err)
	}
	pm := &plannerMetrics{}
	lc := loop.DefaultConfig()
	lc.OnDecide = pm.decide
	lc.Interval = c.interval
	lc.Holder = "dev-" + strconv.Itoa(os.Getpid())
	lc.Policy.Cooldown = c.cooldown
	lc.Tenants = loop.TenantShares(tenants)
	lc.WorkerAuth = acl
	plannerWorkers(&lc, c.stragglerFactor, c.stragglerRounds, d.rdb, "edl:") // the workers' default prefix
	if lc.Callbacks, err = plannerCallbacks("dev", c.callbackAllow, tenants, log); err != nil {
		return d, err
	}
	d.planner.make = func() (*loop.Loop, error) {
		l, err := loop.New(lc, d.store, d.cluster, d.rdb, log)
		if err == nil {
			pm.loop.Store(l)
		}
		return l, err
	}
	if d.loop, err = d.planner.make(); err != nil {
		return d, fmt.Errorf("dev: %w", err)
	}
	pm.loop.Store(d.loop)
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return d, fmt.Errorf("dev: --listen %s: %w", c.listen, err)
	}
	d.apiURL = "http://" + ln.Addr().String()
	apiCfg := devAPIConfig(checkpointView{ckStore}, d.cluster, d.rdb) // exec_flags.go
	apiCfg.BodyReadTimeout, apiCfg.MaxStreamsPerTenant = c.api.BodyReadTimeout, c.api.MaxStreamsPerTenant
	apiCfg.MetricsToken = c.api.MetricsToken
	apiCfg.PlannerRounds = pm.rounds
	apiCfg.Sweeps = sweepstore.New(d.rdb, sweepstore.Config{})
	srv := api.New(apiCfg, d.store, tenants, d.cluster, log)
	pm.srv.Store(srv)
	d.startPlanner(ctx)
	if err := startSweeps(ctx, d.rdb, "edl:", apiCfg.Sweeps, d.store, pm, log); err != nil { // sweeps.go
		return d, fmt.Errorf("dev: %w", err)
	}
	d.apiDone = make(chan struct{})
	go func() {
		defer close(d.apiDone)
		d.errc <- srv.Run(ctx, ln)
	}()
	return d, nil
}

// wait runs until ctx ends or a part fails, then stops everything.
func (d *devEnv) wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-d.errc:
	case <-d.redis.Failed():
		err = fmt.Errorf("dev: stopping: the child redis-server is gone and edl dev does not serve without it: %w", d.redis.Err())
	}
	d.shutdown()
	return err
}

// shutdown stops the API (its requests drained first) and planner, then
// the workers (SIGTERM, SIGKILL after the grace period), then Redis, so
// nothing outlives `edl dev`.
func (d *devEnv) shutdown() {
	d.stop()
	if d.apiDone != nil {
		<-d.apiDone // Run returns within its ShutdownGrace (+1 s to answer what it cut)
	}
	if d.cluster != nil {
		cctx, cancel := context.WithTimeout(context.Background(), d.grace+5*time.Second)
		_ = d.cluster.Close(cctx)
		cancel()
	}
	if d.rdb != nil {
		d.rdb.Close()
	}
	if d.redis != nil {
		d.redis.Stop()
	}
	if d.lock != nil {
		d.lock.Close()
	}
}

// devTenants loads --tenants, or makes (or reuses) the dev tenants whose
// tokens live in <data-dir>/tokens.json.
func devTenants(path, dataDir string, tok *jobs.DevTokens) (*jobs.Tenants, error) {
	if path != "" {
		t, err := loadTenants(path)
		if err != nil {
			return nil, usageErrorf("dev: --tenants %s: %v", path, err)
		}
		return t, nil
	}
	tokPath := filepath.Join(dataDir, "tokens.json")
	if b, err := os.ReadFile(tokPath); err == nil && json.Unmarshal(b, tok) == nil && tok.Default != "" && tok.Admin != "" {
		return jobs.DevTenants(*tok)
	}
	t, fresh, err := jobs.NewDevTenants()
	if err != nil {
		return nil, err
	}
	*tok = fresh
	b, _ := json.MarshalIndent(fresh, "", "  ")
	if err := os.WriteFile(tokPath, append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("dev: write %s: %w", tokPath, err)
	}
	return t, nil
}

func printDevBanner(w io.Writer, d *devEnv) {
	if d.tokens.Default == "" {
		// --tenants: the file keeps only the tokens' hashes, and there is
		// no 'default' tenant, admin or tokens.json to point at.
		fmt.Fprintf(w, `edl dev is up.
  API:      %[1]s   (spec: %[1]s/openapi.json, docs: %[1]s/docs/)
  tenants:  %[2]s   (a token of one of its tenants: the file keeps only their SHA-256)
  Redis:    %[3]s   data: %[4]s

Submit the example job:
  curl -s -X POST %[1]s/v1/jobs -H "Authorization: Bearer $TOKEN" \
       -H 'Content-Type: application/json' --data @examples/job.json

Ctrl-C stops everything.
`, d.apiURL, d.tenants, d.redisURL, d.dataDir)
		return
	}
	fmt.Fprintf(w, `edl dev is up.
  API:      %[1]s   (spec: %[1]s/openapi.json, docs: %[1]s/docs/)
  tenant:   default   token: %[2]s
  admin:    admin     token: %[3]s
  tokens:   %[4]s
  Redis:    %[5]s   data: %[6]s

Submit the example job:
  curl -s -X POST %[1]s/v1/jobs -H 'Authorization: Bearer %[2]s' \
       -H 'Content-Type: application/json' --data @examples/job.json

Ctrl-C stops everything.
`, d.apiURL, d.tokens.Default, d.tokens.Admin, filepath.Join(d.dataDir, "tokens.json"), d.redisURL, d.dataDir)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
