package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/local/redisproc"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// liveCluster is what a live-mode measurement runs on: a redis-server of
// its own and local `edl worker` processes in live mode running the
// script (liveBenchConfig), each worker's output in dir/<id>.out and .err.
type liveCluster struct {
	dir   string
	rp    *redisproc.Proc
	procs map[string]*liveBenchProc
	cfg   liveBenchConfig
	spec  string // the spec file
	debug bool   // the workers record every step's samples (--debug-samples)
	// survivor is the worker whose step lines wait reads.
	survivor string
}

type liveBenchProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startLiveCluster starts redis and c.Workers workers w0, w1, ...; stop
// ends them. debug: every applied step records its samples (the
// accounting's input; it costs a Redis write per step).
func startLiveCluster(ctx context.Context, c liveBenchConfig, debug bool) (*liveCluster, error) {
	dir, err := os.MkdirTemp("", "edl-bench-live-")
	if err != nil {
		return nil, err
	}
	lc := &liveCluster{dir: dir, procs: map[string]*liveBenchProc{}, cfg: c, debug: debug, survivor: "w0"}
	ok := false
	defer func() {
		if !ok {
			lc.stop()
		}
	}()
	if lc.rp, err = redisproc.Start(ctx, filepath.Join(dir, "redis"), redisproc.Options{}); err != nil {
		return nil, fmt.Errorf("live bench: %w", err)
	}
	grace, restarts := 10, 0
	cmd := append([]string{c.Python, c.Script, "--samples", strconv.FormatInt(c.Samples, 10)}, c.Args...)
	spec := jobs.Spec{Name: "bench-live", Workers: jobs.WorkerRange{Min: c.Workers, Max: c.Workers + 1}, Priority: jobs.Guaranteed,
		Checkpoint: jobs.CheckpointPolicy{Keep: 1},
		Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Mode: jobs.ExecLive, Command: cmd, Workdir: c.Workdir,
			Env: map[string]string{"OMP_NUM_THREADS": "1"}, Dataset: &jobs.ExecDataset{Samples: c.Samples, Partitions: c.Parts},
			GracePeriodS: &grace, MaxRestarts: &restarts}}}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("live bench: %w", err)
	}
	lc.spec = filepath.Join(dir, "spec.json")
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(lc.spec, b, 0o644); err != nil {
		return nil, err
	}
	for i := range c.Workers {
		if err := lc.start(fmt.Sprintf("w%d", i)); err != nil {
			return nil, err
		}
	}
	ok = true
	return lc, nil
}

// start starts worker id.
func (lc *liveCluster) start(id string) error {
	out, err := os.Create(filepath.Join(lc.dir, id+".out"))
	if err != nil {
		return err
	}
	errf, err := os.Create(filepath.Join(lc.dir, id+".err"))
	if err != nil {
		out.Close()
		return err
	}
	args := []string{"worker", "--job", "bench", "--redis", lc.rp.URL(), "--spec", lc.spec, "--worker-id", id,
		"--exec-dir", filepath.Join(lc.dir, id), "--min-start", strconv.Itoa(lc.cfg.Workers), "--log-level", "info"}
	if lc.debug {
		args = append(args, "--debug-samples")
	}
	p := exec.Command(lc.cfg.Exe, args...)
	p.Stdout, p.Stderr = out, errf
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.Start(); err != nil {
		out.Close()
		errf.Close()
		return fmt.Errorf("live bench: start worker %s: %w", id, err)
	}
	pr := &liveBenchProc{cmd: p, done: make(chan struct{})}
	lc.procs[id] = pr
	go func() { _ = p.Wait(); out.Close(); errf.Close(); close(pr.done) }()
	return nil
}

// read is the survivor's step lines so far.
func (lc *liveCluster) read() []liveBenchStep {
	return readLiveBenchSteps(filepath.Join(lc.dir, lc.survivor+".out"))
}

// wait polls the survivor's step lines every 100 ms until ok holds or ctx
// ends (the error then quotes the survivor's log).
func (lc *liveCluster) wait(ctx context.Context, what string, ok func([]liveBenchStep) bool) ([]liveBenchStep, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if s := lc.read(); ok(s) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			tail, _ := os.ReadFile(filepath.Join(lc.dir, lc.survivor+".err"))
			return nil, fmt.Errorf("live bench: %s: %w; %s's log ends:\n%s", what, ctx.Err(), lc.survivor, lastBytes(tail, 1500))
		case <-t.C:
		}
	}
}

// stop kills the workers still running (their process groups: the
// programs too), then redis, and removes dir.
func (lc *liveCluster) stop() {
	for _, p := range lc.procs {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	if lc.rp != nil {
		lc.rp.Stop()
	}
	os.RemoveAll(lc.dir)
}

// liveFailedRE is a worker's log line for its program's failed step.
var liveFailedRE = regexp.MustCompile(`^time=(\S+) .*msg="collective failed; step discarded".* gen=(\d+) `)

// killRepeated is the kill scenario repeated (--kills): c.Kills times the
// worker (with its program) at rank k % world of the current generation
// is SIGKILLed and a new worker started, the world back to c.Workers
// before the next kill. For each kill it records every survivor's wait:
// from the SIGKILL to its worker's log line for the failed step.
func (lc *liveCluster) killRepeated(ctx context.Context, c liveBenchConfig, line *liveBenchLine) ([]liveBenchStep, error) {
	opt, err := redis.ParseURL(lc.rp.URL())
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	gk := coord.NewKeys("edl:", "bench").Gen()
	line.Kills, line.KillsByRank = c.Kills, map[string]int{}
	var waits []float64
	var all []liveBenchStep
	next := c.Workers
	for k := range c.Kills {
		var g coord.Generation
		b, err := rdb.Get(ctx, gk).Bytes()
		if err == nil {
			err = json.Unmarshal(b, &g)
		}
		if err != nil || len(g.Members) != c.Workers {
			return nil, fmt.Errorf("live bench: generation before kill %d: %v (%d members)", k+1, err, len(g.Members))
		}
		rank := k % len(g.Members)
		victim := g.Members[rank]
		var survivors []string
		for _, id := range g.Members {
			if id != victim {
				survivors = append(survivors, id)
			}
		}
		lc.survivor = survivors[0]
		killed := time.Now()
		if err := syscall.Kill(-lc.procs[victim].cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("live bench: kill %s: %w", victim, err)
		}
		per := make([]float64, 0, len(survivors))
		for _, id := range survivors {
			d, err := lc.failedAt(ctx, id, g.Number, killed)
			if err != nil {
				return nil, err
			}
			per = append(per, d.Seconds())
		}
		c.Log.Info("live bench kill", "n", k+1, "rank", rank, "victim", victim, "gen", g.Number, "waits_s", per)
		line.SurvivorWait = append(line.SurvivorWait, per)
		line.KillsByRank[strconv.Itoa(rank)]++
		waits = append(waits, per...)
		id := fmt.Sprintf("w%d", next)
		next++
		if err := lc.start(id); err != nil {
			return nil, err
		}
		all, err = lc.wait(ctx, "the world back after a kill", func(s []liveBenchStep) bool {
			n := 0
			for _, x := range s {
				if x.gen > g.Number && x.world == c.Workers {
					n++
				}
			}
			return n >= int(c.After)
		})
		if err != nil {
			return nil, err
		}
		stall, _, step := liveStall(all, g.Number)
		line.StallS, line.StepS = max(line.StallS, stall), step
	}
	sort.Float64s(waits)
	p50, p100 := waits[len(waits)/2], waits[len(waits)-1]
	line.WaitP50S, line.WaitP100S = &p50, &p100
	return all, nil
}

// failedAt waits for worker id's log line saying its step of generation
// gen failed and returns how long after killed it came.
func (lc *liveCluster) failedAt(ctx context.Context, id string, gen int64, killed time.Time) (time.Duration, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(lc.dir, id+".err"))
		for _, l := range strings.Split(string(b), "\n") {
			m := liveFailedRE.FindStringSubmatch(l)
			if m == nil || m[2] != strconv.FormatInt(gen, 10) {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				return 0, fmt.Errorf("live bench: %s's log: %w", id, err)
			}
			return at.Sub(killed), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("live bench: %s logged no failed step of generation %d within a minute of the kill", id, gen)
}
