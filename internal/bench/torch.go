package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
)

// torchResult is one JSON line of `edl bench torch --json`.
type torchResult struct {
	System   string  `json:"system"`   // torchrun | edl-restart | edl-restart-cold | edl-live
	Scenario string  `json:"scenario"` // scale_out | scale_in | failure
	StallS   float64 `json:"stall_s"`  // longest gap between two applied steps on a surviving worker
	// StepsRedone is how many steps a surviving worker computed again
	// after the restart (it resumed from an older checkpoint).
	StepsRedone int64 `json:"steps_redone"`
	// RatioVsTorchrun is StallS over torchrun's in the same scenario (1 for
	// torchrun; null when torchrun was not run).
	RatioVsTorchrun *float64 `json:"ratio_vs_torchrun"`
	Workers         string   `json:"workers"`   // e.g. "2->3"
	Survivors       int      `json:"survivors"` // workers the figures are taken over
	Restarted       bool     `json:"restarted"` // every survivor was seen to restart (else the stall is a lower bound)
	// SamplesMissed and SamplesRepeated count sample ids per epoch (edl-live
	// only: the other systems' scripts do not draw from edl's partitions).
	SamplesMissed   *int64 `json:"samples_missed,omitempty"`
	SamplesRepeated *int64 `json:"samples_repeated,omitempty"`
}

// torchBench is the configuration shared by both systems.
type torchBench struct {
	env             Env
	python, script  string
	scriptArgs      []string
	warmup, after   int
	ckptEvery       int
	timeout         time.Duration
	dir             string
	log             io.Writer // progress lines
	pythonTeeNeeded bool
	workerLogLevel  string // edl-restart's workers (their logs under --keep-dir)
}

var torchScenarios = []string{"scale_out", "scale_in", "failure", "steady"}

// torchSystems are the systems of --mode; ddp runs only the steady
// scenario, torchrun and edl-restart every other.
var torchSystems = []string{"torchrun", "edl-restart", "edl-restart-cold", "edl-live", "ddp"}

func runBenchTorch(ctx context.Context, env Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench torch", "Runs one torchrun DDP script (it must print one line per applied step with the step and\na timestamp, e.g. {\"step\": N, \"time\": UNIX_SECONDS}, and checkpoint to $EDL_CHECKPOINT_DIR)\nunder torchrun (c10d rendezvous, --nnodes=2:3, last_call_timeout=1, join_timeout=60,\n--monitor_interval 1) and under edl restart mode (edl dev in this process), through\nscale-out 2->3, scale-in 3->2 and a SIGKILL of one worker's program, and live mode\n(--live-script, the edl package) through the same events. The steady scenario is the\nstep time on a fixed world of plain DDP (--ddp-script, no edl) and of live mode, side by\nside. Prints one JSON line per system and scenario (--json), then a table (on stderr with\n--json). --mode and --scenarios pick what runs.", stderr)
	modes := fs.String("mode", strings.Join(torchSystems, ","), "systems to run, comma-separated: torchrun, edl-restart (each run in a warm interpreter), edl-restart-cold (trainer.exec.warm false: every run a fresh python), edl-live (examples/torch/train_live.py through the edl package, no restart), ddp (plain torch DDP, no edl: the steady scenario's baseline)")
	liveScript := fs.String("live-script", "examples/torch/train_live.py", "the live-mode script of --mode edl-live (the same model as --script, written with the edl package)")
	scenarios := fs.String("scenarios", strings.Join(torchScenarios, ","), "scenarios, comma-separated: scale_out, scale_in, failure, steady (step time on a fixed world: ddp and edl-live)")
	ddpScript := fs.String("ddp-script", "examples/torch/steady_ddp.py", "the steady scenario's plain DDP script (--mode ddp: the live script's model and data, no edl)")
	steadyWorld := fs.Int("steady-world", 2, "the steady scenario's fixed world")
	steadySteps := fs.Int("steady-steps", 200, "step times the steady scenario measures per round and system")
	steadyWarmup := fs.Int("steady-warmup", 20, "steps the steady scenario skips first (start-up, the first generation's hand-over)")
	steadyRounds := fs.Int("steady-rounds", 2, "steady rounds; the systems alternate round by round and the step times of all rounds are pooled")
	python := fs.String("python", "/usr/bin/python3", "Python with torch (torchrun is its -m torch.distributed.run)")
	script := fs.String("script", "examples/torch/train.py", "the training script")
	scriptArgs := fs.String("script-args", "", "extra arguments for the script (space-separated)")
	warmup := fs.Int("warmup", 15, "applied steps before the event")
	after := fs.Int("after", 10, "steps each survivor applies after its restart before the run stops")
	ckpt := fs.Int("ckpt-every", 20, "the script's --ckpt-every (its checkpoint period in steps)")
	timeout := fs.Duration("timeout", 4*time.Minute, "limit of one scenario of one system")
	asJSON := fs.Bool("json", false, "print JSON lines (the table then goes to stderr)")
	keep := fs.String("keep-dir", "", "keep the agents' and workers' output in this folder")
	workerLog := fs.String("worker-log-level", "warn", "edl-restart's workers' log level (info: each restart's stop, barrier and start, under --keep-dir)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	systems, err := pickList("mode", *modes, torchSystems)
	if err != nil {
		return err
	}
	scen, err := pickList("scenarios", *scenarios, torchScenarios)
	if err != nil {
		return err
	}
	if *warmup < 2 || *after < 1 || *ckpt < 1 {
		return cli.Usagef("bench torch: need --warmup >= 2, --after >= 1, --ckpt-every >= 1")
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, *workerLog) {
		return cli.Usagef("bench torch: --worker-log-level %q: want debug, info, warn or error", *workerLog)
	}
	if *steadyWorld < 1 || *steadySteps < 1 || *steadyWarmup < 1 || *steadyRounds < 1 {
		return cli.Usagef("bench torch: need --steady-world, --steady-steps, --steady-warmup and --steady-rounds >= 1")
	}
	steadySystems, eventSystems := splitSteady(systems)
	wantSteady := slices.Contains(scen, "steady")
	eventScen := slices.DeleteFunc(slices.Clone(scen), func(s string) bool { return s == "steady" })
	switch {
	case slices.Contains(systems, "ddp") && !wantSteady:
		return cli.Usagef("bench torch: --mode ddp runs only the steady scenario: add steady to --scenarios")
	case wantSteady && len(steadySystems) == 0:
		return cli.Usagef("bench torch: the steady scenario runs ddp and edl-live: add one to --mode")
	}
	abs, err := filepath.Abs(*script)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return cli.Usagef("bench torch: --script: %v", err)
	}
	if _, err := exec.LookPath(*python); err != nil {
		return cli.Usagef("bench torch: --python: %v", err)
	}
	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "edl-bench-torch-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	b := &torchBench{env: env, python: *python, script: abs, scriptArgs: strings.Fields(*scriptArgs), warmup: *warmup, after: *after,
		ckptEvery: *ckpt, timeout: *timeout, dir: dir, log: stderr, workerLogLevel: *workerLog}
	b.pythonTeeNeeded, err = pythonAtLeast(ctx, *python, 3, 11)
	if err != nil {
		return err
	}
	var results []torchResult
	base := map[string]float64{}
	emit := func(r torchResult) error {
		if r.System == "torchrun" {
			base[r.Scenario] = r.StallS
			one := 1.0
			r.RatioVsTorchrun = &one
		} else if t, ok := base[r.Scenario]; ok && t > 0 {
			q := math.Round(r.StallS/t*1000) / 1000
			r.RatioVsTorchrun = &q
		}
		results = append(results, r)
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false) // "2->3", not "2-\u003e3"
			return enc.Encode(r)
		}
		return nil
	}
	var errs []error // each failed run, reported at the end; the others go on
	var steady []torchSteadyResult
	if wantSteady {
		abs, err := filepath.Abs(*ddpScript)
		if err != nil {
			return err
		}
		steady, err = b.runSteady(ctx, steadyConfig{ddpScript: abs, liveScript: *liveScript, world: *steadyWorld, batch: 48,
			hidden: "1024,1024,256", warmup: *steadyWarmup, steps: *steadySteps, rounds: *steadyRounds}, steadySystems)
		if err != nil {
			errs = append(errs, err)
		}
		for _, r := range steady {
			if *asJSON {
				if err := json.NewEncoder(stdout).Encode(r); err != nil {
					return err
				}
			}
		}
	}
	for _, sys := range eventSystems {
		for _, sc := range eventScen {
			var r torchResult
			var err error
			switch sys {
			case "torchrun":
				r, err = b.runTorchrun(ctx, sc)
			case "edl-restart":
				r, err = b.runEdlRestart(ctx, sc, true)
			case "edl-restart-cold":
				r, err = b.runEdlRestart(ctx, sc, false)
			case "edl-live":
				r, err = b.runEdlLive(ctx, *liveScript, sc)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("bench torch: %s %s: %w", sys, sc, err))
				if strings.HasPrefix(sys, "edl-restart") && errors.Is(err, errExecRefused) {
					break // the other scenarios would fail the same way
				}
				continue
			}
			if err := emit(r); err != nil {
				return err
			}
		}
	}
	table := stdout
	if *asJSON {
		table = stderr
	}
	if len(results) > 0 {
		printTorchTable(table, results)
	}
	if len(steady) > 0 {
		printSteadyTable(table, steady)
	}
	return errors.Join(errs...)
}

func pickList(flagName, v string, allowed []string) ([]string, error) {
	out, bad, ok := nameList(v, allowed)
	if !ok {
		return nil, cli.Usagef("bench torch: --%s: %q is not one of %s", flagName, bad, strings.Join(allowed, ", "))
	}
	if len(out) == 0 {
		return nil, cli.Usagef("bench torch: --%s: empty", flagName)
	}
	return out, nil
}

func pythonAtLeast(ctx context.Context, python string, major, minor int) (bool, error) {
	out, err := exec.CommandContext(ctx, python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])").Output()
	if err != nil {
		return false, fmt.Errorf("bench torch: %s: %w", python, err)
	}
	var ma, mi int
	if _, err := fmt.Sscan(string(out), &ma, &mi); err != nil {
		return false, fmt.Errorf("bench torch: %s version %q: %w", python, out, err)
	}
	return ma > major || (ma == major && mi >= minor), nil
}

func printTorchTable(w io.Writer, rs []torchResult) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tscenario\tworkers\tstall_s\tsteps_redone\tvs torchrun\tmissed/repeated")
	for _, r := range rs {
		ratio := "-"
		if r.RatioVsTorchrun != nil {
			ratio = strconv.FormatFloat(*r.RatioVsTorchrun, 'f', 2, 64) + "x"
		}
		stall := strconv.FormatFloat(r.StallS, 'f', 2, 64)
		if !r.Restarted && r.System != "edl-live" { // live mode restarts nothing
			stall = ">=" + stall
		}
		acct := "-"
		if r.SamplesMissed != nil && r.SamplesRepeated != nil {
			acct = fmt.Sprintf("%d/%d", *r.SamplesMissed, *r.SamplesRepeated)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.System, r.Scenario, r.Workers, stall, r.StepsRedone, ratio, acct)
	}
	tw.Flush()
}
