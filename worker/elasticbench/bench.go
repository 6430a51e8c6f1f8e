package elasticbench

import (
	"github.com/edl-nomad/edl/internal/freeport"
	"github.com/edl-nomad/edl/jobs"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config sizes the benchmark.
type Config struct {
	Exe         string // the edl binary
	RedisServer string // redis-server binary
	Workers     int
	Spec        jobs.Spec
	Warmup      int // steps before the first event
	Between     int // steps between events
	// OverheadRounds and OverheadSteps size the coordination-overhead
	// figure: rounds of a static and an elastic world, interleaved, each
	// measured over OverheadSteps steps after Warmup.
	OverheadRounds, OverheadSteps int
	// KeepDir, when set, is where the run's files (step logs, worker logs
	// at info level) are written and left; default a temporary folder.
	KeepDir string
	Log     *slog.Logger
}

// Result is the one JSON line `edl bench elastic` prints.
type Result struct {
	Workers           int     `json:"workers"`
	Params            int     `json:"params"`
	StepMS            float64 `json:"step_ms"`
	StaticStepMS      float64 `json:"static_step_ms"`
	ScaleOutPauseMS   float64 `json:"scale_out_pause_ms"`
	ScaleOutGapMS     float64 `json:"scale_out_gap_ms"`
	ScaleInPauseMS    float64 `json:"scale_in_pause_ms"`
	ScaleInGapMS      float64 `json:"scale_in_gap_ms"`
	FailureRecoveryMS float64 `json:"failure_recovery_ms"`
	RestartBaselineMS float64 `json:"restart_baseline_ms"`
	PauseRatio        float64 `json:"pause_ratio"`
	// CoordOverheadPct is the median over interleaved rounds of the
	// elastic world's step time over the static world's, minus 1, in
	// percent; Min and Max are the smallest and largest round's.
	CoordOverheadPct      float64 `json:"coord_overhead_pct"`
	CoordOverheadMinPct   float64 `json:"coord_overhead_min_pct"`
	CoordOverheadMaxPct   float64 `json:"coord_overhead_max_pct"`
	CoordOverheadRounds   int     `json:"coord_overhead_rounds"`
	OverheadStaticStepMS  float64 `json:"overhead_static_step_ms"`
	OverheadElasticStepMS float64 `json:"overhead_elastic_step_ms"`
	SamplesMissed         int64   `json:"samples_missed"`
	SamplesRepeated       int64   `json:"samples_repeated"`
	FinalLossStatic       float64 `json:"final_loss_static"`
	FinalLossElastic      float64 `json:"final_loss_elastic"`
	ElasticAppliedStep    int64   `json:"elastic_applied_steps"`
}

type bench struct {
	cfg   Config
	dir   string
	spec  string
	redis string
	rdb   *redis.Client
	procs map[string]*exec.Cmd
}

// Run runs the whole benchmark.
func Run(ctx context.Context, cfg Config, params int) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	dir := cfg.KeepDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "edl-bench-elastic-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	b := &bench{cfg: cfg, dir: dir, procs: map[string]*exec.Cmd{}}
	defer b.killAll()
	sb, _ := json.Marshal(cfg.Spec)
	b.spec = filepath.Join(dir, "spec.json")
	if err := os.WriteFile(b.spec, sb, 0o644); err != nil {
		return Result{}, err
	}
	stopRedis, err := b.startRedis(ctx)
	if err != nil {
		return Result{}, err
	}
	defer stopRedis()
	res := Result{Workers: cfg.Workers, Params: params}
	if err := b.static(ctx, &res); err != nil {
		return res, fmt.Errorf("static baseline: %w", err)
	}
	if err := b.elastic(ctx, &res); err != nil {
		return res, fmt.Errorf("elastic run: %w", err)
	}
	if err := b.restart(ctx, &res); err != nil {
		return res, fmt.Errorf("restart baseline: %w", err)
	}
	if res.ScaleOutPauseMS > 0 {
		res.PauseRatio = round(res.RestartBaselineMS / res.ScaleOutPauseMS)
	}
	if err := b.overhead(ctx, &res); err != nil {
		return res, fmt.Errorf("coordination overhead: %w", err)
	}
	return res, nil
}

func round(v float64) float64    { return math.Round(v*100) / 100 }
func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

func (b *bench) startRedis(ctx context.Context) (func(), error) {
	port, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.cfg.RedisServer, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", b.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", b.cfg.RedisServer, err)
	}
	b.redis = fmt.Sprintf("redis://127.0.0.1:%d", port)
	b.rdb = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	stop := func() { b.rdb.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for i := 0; ; i++ {
		if b.rdb.Ping(ctx).Err() == nil {
			return stop, nil
		}
		if i > 200 {
			stop()
			return nil, errors.New("redis-server did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) start(name string, args ...string) *exec.Cmd {
	level := "warn"
	if b.cfg.KeepDir != "" {
		level = "info"
	}
	cmd := exec.Command(b.cfg.Exe, append([]string{"worker", "--spec", b.spec, "--step-log", b.logPath(name), "--log-level", level}, args...)...)
	f, err := os.Create(filepath.Join(b.dir, name+".out"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = f, f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.cfg.Log.Warn("start worker", "err", err)
	}
	b.procs[name] = cmd
	return cmd
}

func (b *bench) logPath(name string) string { return filepath.Join(b.dir, name+".steps") }

func (b *bench) killAll() {
	for _, c := range b.procs {
		if c.Process != nil && c.ProcessState == nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// waitSteps waits until the named worker's log has at least n steps.
func (b *bench) waitSteps(ctx context.Context, name string, n int, timeout time.Duration) ([]stepLine, error) {
	deadline := time.Now().Add(timeout)
	for {
		lines := readSteps(b.logPath(name))
		if len(lines) >= n {
			return lines, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return lines, fmt.Errorf("worker %s logged %d of %d steps in %s", name, len(lines), n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) static(ctx context.Context, res *Result) error {
	rdv := filepath.Join(b.dir, "rendezvous")
	if err := os.Mkdir(rdv, 0o755); err != nil {
		return err
	}
	var cmds []*exec.Cmd
	for r := range b.cfg.Workers {
		cmds = append(cmds, b.start(fmt.Sprintf("static%d", r), "--job", "static", "--static-world", strconv.Itoa(b.cfg.Workers),
			"--static-rank", strconv.Itoa(r), "--static-dir", rdv))
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			return fmt.Errorf("static worker: %w", err)
		}
	}
	lines := readSteps(b.logPath("static0"))
	if len(lines) < 10 {
		return fmt.Errorf("static run logged %d steps", len(lines))
	}
	res.StaticStepMS = ms(medianInterval(lines[5:]))
	res.FinalLossStatic = round4(lastEpochLoss(lines))
	return nil
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// Validate names the field at fault.
func (c Config) Validate() error {
	switch {
	case c.Exe == "":
		return errors.New("elasticbench: Exe: the edl binary is required")
	case c.RedisServer == "":
		return errors.New("elasticbench: RedisServer: the redis-server binary is required")
	case c.Workers < 2:
		return fmt.Errorf("elasticbench: Workers %d: must be at least 2", c.Workers)
	case c.Warmup < 2 || c.Between < 1:
		return fmt.Errorf("elasticbench: Warmup %d, Between %d: need Warmup >= 2 and Between >= 1", c.Warmup, c.Between)
	case c.OverheadRounds < 1 || c.OverheadSteps < 2:
		return fmt.Errorf("elasticbench: OverheadRounds %d, OverheadSteps %d: need at least 1 round of 2 steps", c.OverheadRounds, c.OverheadSteps)
	case c.Log == nil:
		return errors.New("elasticbench: Log: a logger is required")
	}
	return nil
}
