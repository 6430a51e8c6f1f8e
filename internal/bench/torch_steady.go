package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/edl-nomad/edl/internal/freeport"
)

// The steady scenario of `edl bench torch`: the step time on a fixed world
// (no event) of plain torch DDP (examples/torch/steady_ddp.py: gloo,
// env:// rendezvous, no edl) and of live mode (examples/torch/train_live.py
// under edl workers), the same model, data set, global batch and world,
// measured side by side in one run (the systems alternate round by round,
// so a machine's load falls on both).

// torchSteadyResult is one JSON line of the steady scenario.
type torchSteadyResult struct {
	System   string `json:"system"`   // ddp | edl-live
	Scenario string `json:"scenario"` // "steady"
	Workers  string `json:"workers"`  // the fixed world, e.g. "2"
	World    int    `json:"world"`
	Rounds   int    `json:"rounds"` // runs of this system, alternating with the other
	Steps    int    `json:"steps"`  // step times measured, over all rounds
	// StepMsMedian and StepMsP90 are over the time between two consecutive
	// applied steps of rank 0 (worker w0 for edl-live) after the warm-up.
	StepMsMedian float64 `json:"step_ms_median"`
	StepMsP90    float64 `json:"step_ms_p90"`
	// RatioVsDDP is StepMsMedian over ddp's in the same run (1 for ddp;
	// null when ddp was not run); RatioP90VsDDP the same for the p90.
	RatioVsDDP    *float64 `json:"ratio_vs_ddp"`
	RatioP90VsDDP *float64 `json:"ratio_p90_vs_ddp"`
	// CPUMsPerStep is the CPU time (user + system) all of the system's
	// processes used per step over the measured steps: both ranks for
	// ddp; the programs, their edl workers and redis for edl-live. Less
	// sensitive than the step time to other load on the machine.
	CPUMsPerStep  float64  `json:"cpu_ms_per_step"`
	RatioCPUVsDDP *float64 `json:"ratio_cpu_vs_ddp"`
}

// steadyConfig is the steady scenario's part of the command line.
type steadyConfig struct {
	ddpScript, liveScript string
	world, batch          int
	hidden                string
	warmup, steps, rounds int
}

// runSteady measures the steady scenario for the systems given (ddp,
// edl-live) and returns one line per system that measured anything; a
// failed round is in the error, the others still count.
func (b *torchBench) runSteady(ctx context.Context, sc steadyConfig, systems []string) ([]torchSteadyResult, error) {
	return b.steadyRounds(sc, systems, func(sys string, round int) (steadyRun, error) {
		if sys == "ddp" {
			return b.steadyDDP(ctx, sc, round)
		}
		return b.steadyLive(ctx, sc)
	})
}

// steadyRounds runs sc.rounds rounds of every system (run measures one)
// and makes the lines.
func (b *torchBench) steadyRounds(sc steadyConfig, systems []string, run func(sys string, round int) (steadyRun, error)) ([]torchSteadyResult, error) {
	gaps := map[string][]float64{}
	rounds := map[string]int{}
	cpu := map[string][]time.Duration{}
	var errs []error
	for r := range sc.rounds {
		for _, sys := range systems {
			fmt.Fprintf(b.log, "bench torch: %s steady: round %d of %d, world %d, %d steps after %d of warm-up\n", sys, r+1, sc.rounds, sc.world, sc.steps, sc.warmup)
			m, err := run(sys, r)
			if err != nil {
				errs = append(errs, fmt.Errorf("bench torch: %s steady round %d: %w", sys, r+1, err))
				continue
			}
			gaps[sys] = append(gaps[sys], m.gaps...)
			cpu[sys] = append(cpu[sys], m.cpuPerStep)
			rounds[sys]++
		}
	}
	var out []torchSteadyResult
	for _, sys := range systems {
		g := gaps[sys]
		if len(g) == 0 {
			continue
		}
		out = append(out, torchSteadyResult{System: sys, Scenario: "steady", Workers: strconv.Itoa(sc.world), World: sc.world,
			Rounds: rounds[sys], Steps: len(g), StepMsMedian: roundTo(1000*quantile(g, 0.5), 2), StepMsP90: roundTo(1000*quantile(g, 0.9), 2),
			CPUMsPerStep: roundTo(meanMs(cpu[sys]), 2)})
	}
	for i := range out {
		for _, base := range out {
			if base.System != "ddp" {
				continue
			}
			out[i].RatioVsDDP = ratio(out[i].StepMsMedian, base.StepMsMedian)
			out[i].RatioP90VsDDP = ratio(out[i].StepMsP90, base.StepMsP90)
			out[i].RatioCPUVsDDP = ratio(out[i].CPUMsPerStep, base.CPUMsPerStep)
		}
	}
	return out, errors.Join(errs...)
}

func meanMs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return float64(t) / float64(len(ds)) / 1e6
}

func ratio(a, b float64) *float64 {
	if b <= 0 {
		return nil
	}
	q := roundTo(a/b, 3)
	return &q
}

func roundTo(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// quantile is the nearest-rank q-quantile of xs (0 for none).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// steadyGaps are the step times of s: the time between consecutive lines
// of the same generation at world, after the first warmup lines at that
// world, at most n of them.
func steadyGaps(s []liveBenchStep, world, warmup, n int) []float64 {
	var out []float64
	seen := 0
	for i, x := range s {
		if x.world != world {
			continue
		}
		seen++
		if seen > warmup+1 && s[i-1].world == world && s[i-1].gen == x.gen && len(out) < n {
			out = append(out, x.at-s[i-1].at)
		}
	}
	return out
}

// steadyRun is one round of one system: its step times and the CPU time
// all its processes used per step over them.
type steadyRun struct {
	gaps       []float64
	cpuPerStep time.Duration
}

// measureSteady polls read (the step lines) every 100 ms until the warm-up
// is over and again until sc.steps step times follow it; the CPU time of
// roots' process trees is sampled at both points.
func measureSteady(ctx context.Context, sc steadyConfig, read func() []liveBenchStep, roots func() []int, what func() string) (steadyRun, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var cpu0 time.Duration
	lines0 := -1
	for {
		s := read()
		n := 0
		for _, x := range s {
			if x.world == sc.world {
				n++
			}
		}
		if lines0 < 0 && n > sc.warmup {
			cpu0, lines0 = treeCPU(roots()), n
		}
		if g := steadyGaps(s, sc.world, sc.warmup, sc.steps); len(g) >= sc.steps && lines0 >= 0 {
			run := steadyRun{gaps: g}
			if n > lines0 {
				run.cpuPerStep = (treeCPU(roots()) - cpu0) / time.Duration(n-lines0)
			}
			return run, nil
		}
		select {
		case <-ctx.Done():
			return steadyRun{}, fmt.Errorf("%d of %d step times after the warm-up: %w%s", len(steadyGaps(s, sc.world, sc.warmup, sc.steps)), sc.steps, ctx.Err(), what())
		case <-t.C:
		}
	}
}

// steadyDDP runs sc.world processes of the DDP script (env:// rendezvous on
// a plain TCPStore) and measures rank 0's step times.
func (b *torchBench) steadyDDP(ctx context.Context, sc steadyConfig, round int) (steadyRun, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	runDir := filepath.Join(b.dir, fmt.Sprintf("ddp-steady-%d", round))
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return steadyRun{}, err
	}
	port, err := freeport.Loopback()
	if err != nil {
		return steadyRun{}, err
	}
	steps := sc.warmup + sc.steps + 50 // still running when the last step time is read
	var pids []int
	var dones []chan struct{}
	defer func() {
		for i, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-dones[i]
		}
	}()
	out0 := filepath.Join(runDir, "rank0.out")
	for rank := range sc.world {
		cmd := exec.Command(b.python, sc.ddpScript, "--steps", strconv.Itoa(steps), "--samples", strconv.FormatInt(steadySamples(sc), 10),
			"--batch", strconv.Itoa(sc.batch), "--hidden", sc.hidden)
		cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(sc.world), "MASTER_ADDR=127.0.0.1",
			"MASTER_PORT="+strconv.Itoa(port), "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, err := os.Create(filepath.Join(runDir, fmt.Sprintf("rank%d.out", rank)))
		if err != nil {
			return steadyRun{}, err
		}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			out.Close()
			return steadyRun{}, fmt.Errorf("start DDP rank %d: %w", rank, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); out.Close(); close(done) }()
		pids, dones = append(pids, cmd.Process.Pid), append(dones, done)
	}
	return measureSteady(ctx, sc, func() []liveBenchStep { return readLiveBenchSteps(out0) },
		func() []int { return pids }, func() string {
			tail, _ := os.ReadFile(out0)
			return "; rank 0's output ends:\n" + lastBytes(tail, 1500)
		})
}

// steadyLive runs the live script under sc.world edl workers (no debug
// records: the production path) and measures w0's step times in one
// generation at that world; then the workers are stopped.
func (b *torchBench) steadyLive(ctx context.Context, sc steadyConfig) (steadyRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return steadyRun{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	lc, err := startLiveCluster(ctx, liveBenchConfig{Exe: exe, Python: b.python, Script: sc.liveScript, Workers: sc.world,
		Samples: steadySamples(sc), Parts: 32, Args: []string{"--batch", strconv.Itoa(sc.batch), "--hidden", sc.hidden}}, false)
	if err != nil {
		return steadyRun{}, err
	}
	defer lc.stop()
	// The workers, their programs and redis: what live mode costs per step.
	roots := func() []int {
		out := []int{lc.rp.Pid()}
		for _, p := range lc.procs {
			out = append(out, p.cmd.Process.Pid)
		}
		return out
	}
	return measureSteady(ctx, sc, lc.read, roots, func() string {
		tail, _ := os.ReadFile(filepath.Join(lc.dir, lc.survivor+".err"))
		return "; w0's log ends:\n" + lastBytes(tail, 1500)
	})
}

// treeCPU is the user and system CPU time of the processes roots and all
// their descendants (procCPU: /proc, clock ticks of 10 ms).
func treeCPU(roots []int) time.Duration {
	var total time.Duration
	seen := map[int]bool{}
	todo := append([]int(nil), roots...)
	for len(todo) > 0 {
		pid := todo[0]
		todo = todo[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		total += procCPU(pid)
		todo = append(todo, childPIDs(pid)...)
	}
	return total
}

// steadySamples: one epoch longer than the run (the job must not end
// while it is measured).
func steadySamples(sc steadyConfig) int64 {
	return max(19200, int64(sc.warmup+sc.steps+50)*int64(sc.batch))
}

// splitSteady splits --mode's systems into the steady scenario's (ddp
// first: the baseline) and the event scenarios' (all but ddp).
func splitSteady(systems []string) (steady, event []string) {
	if slices.Contains(systems, "ddp") {
		steady = append(steady, "ddp")
	}
	if slices.Contains(systems, "edl-live") {
		steady = append(steady, "edl-live")
	}
	for _, s := range systems {
		if s != "ddp" {
			event = append(event, s)
		}
	}
	return steady, event
}

func printSteadyTable(w io.Writer, rs []torchSteadyResult) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tscenario\tworld\tsteps\tstep_ms median\tp90\tcpu_ms/step\tvs ddp (median, p90, cpu)")
	for _, r := range rs {
		vs := "-"
		if r.RatioVsDDP != nil && r.RatioP90VsDDP != nil && r.RatioCPUVsDDP != nil {
			vs = fmt.Sprintf("%.3fx, %.3fx, %.3fx", *r.RatioVsDDP, *r.RatioP90VsDDP, *r.RatioCPUVsDDP)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%s\n", r.System, r.Scenario, r.World, r.Steps, r.StepMsMedian, r.StepMsP90, r.CPUMsPerStep, vs)
	}
	tw.Flush()
}
