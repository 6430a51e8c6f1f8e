package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/elasticbench"
	"github.com/edl-nomad/edl/worker/trainer"
)

func benchElastic(ctx context.Context, _ Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench elastic", "Runs a job of local `edl worker` processes against its own redis-server and measures\nthe pause of a join (n -> n+1) and a graceful leave, recovery from a SIGKILL, a\nstop-checkpoint-restart baseline, the sample accounting, and the coordination overhead\n(interleaved rounds of a static and an elastic world: the median round and the spread).", stderr)
	workers := fs.Int("workers", 4, "workers before the join")
	hidden := fs.String("hidden", "1024,768", "hidden layer widths")
	features := fs.Int("features", 256, "input features")
	classes := fs.Int("classes", 10, "classes")
	samples := fs.Int("samples", 24576, "samples per epoch")
	partitions := fs.Int("partitions", 96, "partitions")
	epochs := fs.Int("epochs", 2, "epochs")
	batch := fs.Int("batch", 128, "global batch")
	warmup := fs.Int("warmup", 30, "steps before the first event")
	between := fs.Int("between", 15, "steps between events")
	ovRounds := fs.Int("overhead-rounds", 5, "coordination overhead: rounds of a static and an elastic world, interleaved (the figure is the median round, with the spread)")
	ovSteps := fs.Int("overhead-steps", 60, "coordination overhead: steps measured per world and round, after --warmup")
	redisBin := fs.String("redis-server", "redis-server", "redis-server binary")
	asJSON := fs.Bool("json", false, "print one JSON line")
	keep := fs.String("keep-dir", "", "write step logs and worker logs (info level) to this folder and keep them")
	var level cli.LogLevel
	fs.Var(&level, "log-level", "debug, info, warn or error")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	hid, _, ok := intList(*hidden, func(n int) bool { return n > 0 })
	if !ok {
		return cli.Usagef("bench elastic: invalid value %q for flag --hidden", *hidden)
	}
	if *workers < 2 {
		return cli.Usagef("bench elastic: --workers must be >= 2")
	}
	rs, err := exec.LookPath(*redisBin)
	if err != nil {
		return cli.Usagef("bench elastic: --redis-server: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	spec := jobs.Spec{Name: "bench", Workers: jobs.WorkerRange{Min: *workers, Max: *workers + 1},
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
			Model:   jobs.MLPModel{Hidden: hid},
			Dataset: jobs.SyntheticDataset{Seed: 1, Samples: *samples, Features: *features, Classes: *classes, Partitions: *partitions},
			Epochs:  *epochs, BatchSize: *batch, LearningRate: 0.05, Momentum: 0.9,
		}}}
	params := trainer.ModelConfigFrom(*spec.Trainer.Builtin).NumParams()
	res, err := elasticbench.Run(ctx, elasticbench.Config{Exe: exe, RedisServer: rs, Workers: *workers, Spec: spec,
		Warmup: *warmup, Between: *between, OverheadRounds: *ovRounds, OverheadSteps: *ovSteps, KeepDir: *keep, Log: cli.NewLogger(stderr, level.Level, false)}, params)
	if err != nil {
		return fmt.Errorf("bench elastic: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Fprintln(stdout, string(b))
	return nil
}
