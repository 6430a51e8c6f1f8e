package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/worker"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/redis/go-redis/v9"
)

// Live mode's measurement for `edl bench torch` (the torchrun and
// edl-restart lines are torch.go's): one scenario of
// examples/torch/train_live.py under local `edl worker` processes in live
// mode, against a redis-server of its own.

// liveBenchConfig is one live-mode measurement.
type liveBenchConfig struct {
	Exe      string   // the edl binary (os.Executable())
	Python   string   // default /usr/bin/python3
	Script   string   // default examples/torch/train_live.py
	Workdir  string   // the script's working directory; "" = the current one
	Scenario string   // "join" (n -> n+1), "leave" (n -> n-1, SIGTERM), "kill" (n -> n-1, SIGKILL); also "scale-out", "scale-in", "failure"
	Workers  int      // before the event; default 2
	Samples  int64    // data set (one epoch); default 19200
	Parts    int      // partitions; default 32
	Args     []string // more script arguments (--batch, --hidden, ...)
	Warmup   int64    // applied steps before the event; default 30
	Kills    int      // kill: events in a row, each of the next rank (0, 1, ...), a new worker after each; default 1
	After    int64    // applied steps in the new generation before the line is taken; default 10
	Timeout  time.Duration
	Log      *slog.Logger
}

// liveBenchLine is the JSON line of one live-mode scenario: the exec-mode
// bench's fields ({"system","scenario","stall_s","steps_redone",
// "ratio_vs_torchrun"}; the caller fills the ratio from its torchrun line)
// plus the sample accounting.
type liveBenchLine struct {
	System          string   `json:"system"` // "edl-live"
	Scenario        string   `json:"scenario"`
	StallS          float64  `json:"stall_s"`      // the survivors' longest pause around the event, less one median step
	StepsRedone     int64    `json:"steps_redone"` // applied steps a survivor had to apply again
	RatioVsTorchrun *float64 `json:"ratio_vs_torchrun,omitempty"`
	SamplesMissed   int64    `json:"samples_missed"`
	SamplesRepeated int64    `json:"samples_repeated"`
	StepS           float64  `json:"step_s"` // median time between a survivor's steps before the event
	World           int      `json:"world"`  // workers before the event
	// Kills > 1 (--kills): every survivor's wait after each kill, from the
	// SIGKILL to the moment its step in flight ended (its worker logged
	// the failed collective), over all kills.
	Kills        int            `json:"kills,omitempty"`
	WaitP50S     *float64       `json:"survivor_wait_p50_s,omitempty"`
	WaitP100S    *float64       `json:"survivor_wait_p100_s,omitempty"`
	KillsByRank  map[string]int `json:"kills_by_rank,omitempty"`
	SurvivorWait [][]float64    `json:"survivor_waits_s,omitempty"` // per kill, by survivor
}

var liveBenchStepRE = regexp.MustCompile(`^STEP step=\d+ time=([0-9.]+) rank=\d+ world=(\d+) gen=(\d+) loss=\S+ applied=(-?\d+)`)

// liveScenarioAlias maps other benches' scenario names to live's events.
var liveScenarioAlias = map[string]string{"scale-out": "join", "scale_out": "join", "scale-in": "leave", "scale_in": "leave", "failure": "kill"}

type liveBenchStep struct {
	at      float64
	world   int
	gen     int64
	applied int64
}

// benchTorchLive runs one scenario to the end of the job and returns its line.
func benchTorchLive(ctx context.Context, c liveBenchConfig) (liveBenchLine, error) {
	c.Python = cmp.Or(c.Python, "/usr/bin/python3")
	c.Script = cmp.Or(c.Script, "examples/torch/train_live.py")
	c.Workers = cmp.Or(c.Workers, 2)
	c.Samples = cmp.Or(c.Samples, 19200)
	c.Parts = cmp.Or(c.Parts, 32)
	c.Warmup = cmp.Or(c.Warmup, 30)
	c.After = cmp.Or(c.After, 10)
	c.Timeout = cmp.Or(c.Timeout, 5*time.Minute+time.Duration(max(c.Kills-1, 0))*2*time.Minute)
	c.Log = cmp.Or(c.Log, slog.New(slog.DiscardHandler))
	line := liveBenchLine{System: "edl-live", Scenario: c.Scenario, World: c.Workers}
	if ev, ok := liveScenarioAlias[c.Scenario]; ok {
		c.Scenario = ev
	}
	switch {
	case c.Scenario != "join" && c.Scenario != "leave" && c.Scenario != "kill":
		return line, fmt.Errorf("live bench: scenario %q: want join, leave or kill", c.Scenario)
	case c.Workers < 2 && c.Scenario != "join":
		return line, fmt.Errorf("live bench: %s needs at least 2 workers", c.Scenario)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	lc, err := startLiveCluster(ctx, c, true)
	if err != nil {
		return line, err
	}
	defer lc.stop()
	procs, start := lc.procs, lc.start
	wait := func(what string, ok func([]liveBenchStep) bool) ([]liveBenchStep, error) {
		return lc.wait(ctx, what, ok)
	}
	before, err := wait("warm-up steps", func(s []liveBenchStep) bool {
		return len(s) > 0 && s[len(s)-1].applied >= c.Warmup && s[len(s)-1].world == c.Workers
	})
	if err != nil {
		return line, err
	}
	gen0 := before[len(before)-1].gen
	victim := fmt.Sprintf("w%d", c.Workers-1)
	c.Log.Info("live bench event", "scenario", c.Scenario, "gen", gen0, "applied", before[len(before)-1].applied)
	switch c.Scenario {
	case "join":
		err = start(fmt.Sprintf("w%d", c.Workers))
	case "leave":
		err = procs[victim].cmd.Process.Signal(syscall.SIGTERM)
	case "kill":
		if c.Kills > 1 {
			all, err := lc.killRepeated(ctx, c, &line)
			if err != nil {
				return line, err
			}
			return lc.finishLine(ctx, c, line, all, gen0)
		}
		err = syscall.Kill(-procs[victim].cmd.Process.Pid, syscall.SIGKILL) // the worker and its program
	}
	if err != nil {
		return line, fmt.Errorf("live bench: %s: %w", c.Scenario, err)
	}
	all, err := wait("steps in the next generation", func(s []liveBenchStep) bool {
		var first int64 = -2
		for _, x := range s {
			if x.gen > gen0 && first == -2 {
				first = x.applied
			}
		}
		return first > -2 && s[len(s)-1].applied >= first+c.After
	})
	if err != nil {
		return line, err
	}
	return lc.finishLine(ctx, c, line, all, gen0)
}

// finishLine fills the stall from the survivor's steps around gen0 and,
// once every worker ended, the sample accounting.
func (lc *liveCluster) finishLine(ctx context.Context, c liveBenchConfig, line liveBenchLine, all []liveBenchStep, gen0 int64) (liveBenchLine, error) {
	if line.Kills <= 1 {
		line.StallS, line.StepsRedone, line.StepS = liveStall(all, gen0)
	}
	// The accounting needs the whole epoch: wait for the workers to end.
	for id, p := range lc.procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			return line, fmt.Errorf("live bench: worker %s still running: %w", id, ctx.Err())
		}
	}
	opt, err := redis.ParseURL(lc.rp.URL())
	if err != nil {
		return line, err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	recs, err := datapipe.New(rdb, coord.NewKeys("edl:", "bench"), "bench").DebugRecords(ctx)
	if err != nil {
		return line, fmt.Errorf("live bench: %w", err)
	}
	if len(recs) == 0 {
		return line, errors.New("live bench: no debug records: no step was applied")
	}
	line.SamplesMissed, line.SamplesRepeated, err = worker.CheckLiveSamples(recs, c.Samples, c.Parts, epochsArg(c.Args))
	return line, err
}

// liveStall: the survivor's longest gap between two step lines from the
// last step of gen0 to the end, less the median gap before; steps redone:
// how far the first step of the next generation starts behind the
// furthest applied before.
func liveStall(s []liveBenchStep, gen0 int64) (stall float64, redone int64, step float64) {
	var gaps []float64
	var maxBefore int64 = -1
	lastBefore := -1
	for i, x := range s {
		if x.gen <= gen0 {
			lastBefore = i
			maxBefore = max(maxBefore, x.applied)
			if i > 0 && s[i-1].gen == x.gen {
				gaps = append(gaps, x.at-s[i-1].at)
			}
		}
	}
	sort.Float64s(gaps)
	if len(gaps) > 0 {
		step = gaps[len(gaps)/2]
	}
	longest := 0.0
	for i := max(lastBefore, 0) + 1; i < len(s); i++ {
		longest = max(longest, s[i].at-s[i-1].at)
	}
	for _, x := range s {
		if x.gen > gen0 {
			// x.applied is the last step applied before its batch.
			redone = max(0, maxBefore-x.applied)
			break
		}
	}
	return max(0, longest-step), redone, step
}

func readLiveBenchSteps(path string) []liveBenchStep {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []liveBenchStep
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := liveBenchStepRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var x liveBenchStep
		x.at, _ = strconv.ParseFloat(m[1], 64)
		x.world, _ = strconv.Atoi(m[2])
		x.gen, _ = strconv.ParseInt(m[3], 10, 64)
		x.applied, _ = strconv.ParseInt(m[4], 10, 64)
		out = append(out, x)
	}
	return out
}

// epochsArg is the script's --epochs among args (default 1).
func epochsArg(args []string) int {
	if i := slices.Index(args, "--epochs"); i >= 0 && i+1 < len(args) {
		if n, err := strconv.Atoi(args[i+1]); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

func lastBytes(b []byte, n int) string {
	s := string(b)
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}

// benchTorchLiveCmd is `edl bench torch-live`: benchTorchLive for the
// scenarios given, one JSON line each (the lines `edl bench torch` prints
// for system "edl-live").
func benchTorchLiveCmd(ctx context.Context, _ Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench torch-live", "Runs examples/torch/train_live.py under local `edl worker` processes in live mode (its own\nredis-server) and measures, per scenario, the survivors' stall and the samples missed and\nrepeated over the epoch.", stderr)
	scenarios := fs.String("scenario", "join,leave,kill", "comma-separated: join, leave, kill")
	workers := fs.Int("workers", 2, "workers before the event")
	samples := fs.Int64("samples", 19200, "data set samples (one epoch)")
	batch := fs.Int("batch", 48, "global batch")
	hidden := fs.String("hidden", "1024,1024,256", "hidden layer widths (the 1.6M-parameter MLP by default)")
	warmup := fs.Int64("warmup", 30, "applied steps before the event")
	kills := fs.Int("kills", 1, "kill: kills in a row, of rank 0, 1, ... in turn, a new worker after each (each survivor's wait after each kill)")
	python := fs.String("python", "/usr/bin/python3", "Python with torch")
	script := fs.String("script", "examples/torch/train_live.py", "the live script")
	scriptArgs := fs.String("script-args", "", "more arguments for the script, space-separated (e.g. \"--device cuda --backend gloo\": scripts/gpu-check.sh)")
	asJSON := fs.Bool("json", false, "print JSON lines")
	var level cli.LogLevel
	fs.Var(&level, "log-level", "debug, info, warn or error")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for _, sc := range strings.Split(*scenarios, ",") {
		line, err := benchTorchLive(ctx, liveBenchConfig{Exe: exe, Python: *python, Script: *script, Scenario: strings.TrimSpace(sc),
			Workers: *workers, Samples: *samples, Warmup: *warmup, Kills: *kills,
			Args: append([]string{"--batch", strconv.Itoa(*batch), "--hidden", *hidden}, strings.Fields(*scriptArgs)...), Log: cli.NewLogger(stderr, level.Level, false)})
		if err != nil {
			return fmt.Errorf("bench torch-live: %w", err)
		}
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(line); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(stdout, "%-8s %-6s world %d: stall %.3f s (step %.3f s), steps redone %d, samples missed %d, repeated %d\n",
			line.System, line.Scenario, line.World, line.StallS, line.StepS, line.StepsRedone, line.SamplesMissed, line.SamplesRepeated)
		if line.WaitP50S != nil {
			for k, w := range line.SurvivorWait {
				fmt.Fprintf(stdout, "  kill %d: survivors' waits %v s\n", k+1, w)
			}
			fmt.Fprintf(stdout, "  %d kills (by rank %v): survivor's wait after a kill p50 %.3f s, p100 %.3f s\n", line.Kills, line.KillsByRank, *line.WaitP50S, *line.WaitP100S)
		}
	}
	return nil
}
