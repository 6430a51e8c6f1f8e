package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/planner/loop"
)

// fullCluster is a cluster whose every GPU is held by somebody else: jobs
// queue, nothing runs, nothing changes. It answers at once.
type fullCluster struct{}

func (fullCluster) Capacity(ctx context.Context) (jobs.Capacity, error) {
	var c jobs.Capacity
	for i := range 16 {
		c.Nodes = append(c.Nodes, jobs.Node{ID: "n" + strconv.Itoa(i), Class: jobs.GPUClass{Model: "A100", MemoryMiB: 81920},
			GPUs: 8, CPUSlots: 8})
	}
	return c, nil
}
func (fullCluster) Workers(ctx context.Context, jobID string) ([]jobs.Worker, error) { return nil, nil }
func (fullCluster) Scale(ctx context.Context, j jobs.Job, n int, reason string) error {
	return fmt.Errorf("scale %s: the cluster is full", j.ID)
}
func (fullCluster) StopWorker(ctx context.Context, jobID, workerID, reason string) error { return nil }
func (fullCluster) Teardown(ctx context.Context, jobID string) error                     { return nil }

type plannerIdleResult struct {
	Jobs      int     `json:"jobs"`
	IntervalS float64 `json:"interval_s"`
	MeasureS  float64 `json:"measure_s"`
	Rounds    int64   `json:"rounds"`
	// CPUFraction is user+system CPU of this process (API and planner) over
	// the measured wall time: 1 is one core.
	CPUFraction float64 `json:"cpu_fraction"`
	// RedisCPUFraction is the same for the redis-server child.
	RedisCPUFraction float64 `json:"redis_cpu_fraction"`
	// FirstRoundMs is the takeover round that reads every job.
	FirstRoundMs float64 `json:"first_round_ms"`
	GOMAXPROCS   int     `json:"gomaxprocs"`
}

func benchPlannerIdle(ctx context.Context, _ Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench planner-idle", `Starts its own redis-server, the API and the planner (as edl serve runs them) over a
cluster whose GPUs are all taken, submits --jobs guaranteed jobs that must queue,
waits until the planner has recorded why each waits, then measures for --measure
the CPU this process uses (getrusage: user + system) and redis-server's (from
/proc), as a fraction of one core. Nothing changes while it measures: the figure
is what an idle control plane costs at that backlog (aim: <= 0.05).`, stderr)
	n := fs.Int("jobs", 10000, "queued jobs")
	interval := fs.Duration("interval", loop.DefaultConfig().Interval, "planner round interval (edl serve's --planner-interval)")
	measure := fs.Duration("measure", 20*time.Second, "how long to measure")
	asJSON := fs.Bool("json", false, "print one JSON line")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *n < 1 || *interval <= 0 || *measure <= 0 {
		return cli.Usagef("bench planner-idle: --jobs must be >= 1, --interval and --measure positive")
	}
	rp, rdb, stopRedis, err := startRedis(ctx, "bench planner-idle", "edl-bench-planner-", 32)
	if err != nil {
		return err
	}
	defer stopRedis()
	store := jobstore.New(rdb, jobstore.Config{})
	tenants, _, err := jobs.NewDevTenants()
	if err != nil {
		return err
	}
	spec, err := jobs.DecodeSpec([]byte(`{"name":"queued","workers":{"min":4,"max":8},"gpus_per_worker":1,
		"trainer":{"kind":"builtin","builtin":{"model":{"hidden":[16]},"dataset":{"samples":1000,"features":8,"classes":2,"partitions":4},"epochs":1,"batch_size":32,"learning_rate":0.1}}}`))
	if err != nil {
		return fmt.Errorf("bench planner-idle: spec: %w", err)
	}
	if err := submitMany(ctx, store, spec, *n); err != nil {
		return fmt.Errorf("bench planner-idle: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lc := loop.DefaultConfig()
	lc.Interval = *interval
	lc.Holder = "bench-" + strconv.Itoa(os.Getpid())
	lc.Tenants = loop.TenantShares(tenants)
	pl, err := loop.New(lc, store, fullCluster{}, rdb, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := api.New(api.Config{}, store, tenants, fullCluster{}, log)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = pl.Run(rctx) }()
	go func() { defer wg.Done(); _ = srv.Run(rctx, ln) }()
	defer wg.Wait()
	start := time.Now()
	for pl.Rounds() < 1 {
		if err := periodic.Sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	first := time.Since(start)
	// Settle: the round after the first records each job's reason; then
	// wait for two more rounds with nothing left to write.
	for r := pl.Rounds() + 3; pl.Rounds() < r; {
		if err := periodic.Sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	runtime.GC()
	r0, c0, rc0 := pl.Rounds(), selfCPU(), procCPU(rp.Pid())
	t0 := time.Now()
	if err := periodic.Sleep(ctx, *measure); err != nil {
		return err
	}
	wall := time.Since(t0)
	res := plannerIdleResult{Jobs: *n, IntervalS: interval.Seconds(), MeasureS: wall.Seconds(), Rounds: pl.Rounds() - r0,
		CPUFraction:      (selfCPU() - c0).Seconds() / wall.Seconds(),
		RedisCPUFraction: (procCPU(rp.Pid()) - rc0).Seconds() / wall.Seconds(),
		FirstRoundMs:     float64(first.Microseconds()) / 1000, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	cancel()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "idle control plane, %d queued jobs, round every %s: %.1f %% of a core (redis-server %.1f %%), %d rounds in %.0f s; first round %.0f ms\n",
		res.Jobs, *interval, 100*res.CPUFraction, 100*res.RedisCPUFraction, res.Rounds, res.MeasureS, res.FirstRoundMs)
	return nil
}

// submitMany creates n jobs with 16 submitters.
func submitMany(ctx context.Context, store *jobstore.Store, spec jobs.Spec, n int) error {
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	per := (n + 15) / 16
	for w := range 16 {
		lo, hi := w*per, min((w+1)*per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if _, _, err := store.Create(ctx, "default", spec, ""); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// selfCPU is this process's user + system CPU time (getrusage).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is another process's user + system CPU time from /proc (0 when
// unreadable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}
