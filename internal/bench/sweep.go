package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
)

// sweepResult is one JSON line of `edl bench sweep --json`.
type sweepResult struct {
	Mode string `json:"mode"`
	// WallS is from the submit to the sweep's end.
	WallS float64 `json:"wall_s"`
	// SlotSUsed and SlotSIdle integrate the cluster's held and free slots
	// over the wall time (sampled every --sample).
	SlotSUsed   float64        `json:"slot_s_used"`
	SlotSIdle   float64        `json:"slot_s_idle"`
	BestTrial   map[string]any `json:"best_trial"`
	BestMetric  float64        `json:"best_metric"`
	BestIndex   int            `json:"best_index"`
	Slots       int            `json:"slots"`
	Trials      int            `json:"trials"`
	Cut         int            `json:"cut"`
	Completed   int            `json:"completed"`
	Grown       int            `json:"grown"`
	IdleGrowS   float64        `json:"idle_while_growable_slot_s"`
	MaxWorkers  int            `json:"max_trial_workers"`
	SweepID     string         `json:"sweep_id"`
	Concurrency int            `json:"max_concurrent"`
}

func runBenchSweep(ctx context.Context, env Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench sweep", "Runs the same seeded ASHA sweep of the built-in MLP (learning rate and width) twice on\na fresh edl dev each time: elastic (a trial has 1..--slots workers; a cut trial's slots\ngo to the best survivors) and static (every trial at --slots/--concurrent workers, same\nscheduler and trials). Prints one JSON line per mode.", stderr)
	slots := fs.Int("slots", 4, "CPU worker slots of the edl dev cluster")
	trials := fs.Int("trials", 16, "trials")
	concurrent := fs.Int("concurrent", 4, "max_concurrent")
	seed := fs.Int64("seed", 1, "the sweep's seed")
	grace := fs.Int64("grace", 32, "ASHA grace (steps)")
	maxSteps := fs.Int64("max", 512, "ASHA max (steps): the trials' length")
	hidden := fs.String("widths", "128,512,1024", "the width choices (one hidden layer)")
	modes := fs.String("modes", "elastic,static", "modes to run, in order")
	sample := fs.Duration("sample", 100*time.Millisecond, "how often the cluster's slots are sampled")
	timeout := fs.Duration("timeout", 15*time.Minute, "give up on a mode after this long")
	events := fs.Bool("events", false, "also write each sweep's event log to stderr")
	_ = fs.Bool("json", true, "print one JSON line per mode (the only output format)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *slots < 1 || *concurrent < 1 || *slots%*concurrent != 0 || *trials < 1 {
		return cli.Usagef("bench sweep: need --slots a multiple of --concurrent, both >= 1, and --trials >= 1")
	}
	ns, _, ok := intList(*hidden, func(n int) bool { return n >= 1 })
	if !ok {
		return cli.Usagef("bench sweep: --widths %q: comma-separated widths", *hidden)
	}
	var widths []any
	for _, n := range ns {
		widths = append(widths, float64(n))
	}
	for _, mode := range strings.Split(*modes, ",") {
		if mode != "elastic" && mode != "static" {
			return cli.Usagef("bench sweep: --modes: %q is not elastic or static", mode)
		}
		spec := benchSweepSpec(mode, *slots, *trials, *concurrent, *seed, *grace, *maxSteps, widths)
		mctx, cancel := context.WithTimeout(ctx, *timeout)
		var evw io.Writer
		if *events {
			evw = stderr
		}
		res, err := sweepOnce(mctx, env, mode, spec, *slots, *sample, evw)
		cancel()
		if err != nil {
			return fmt.Errorf("bench sweep %s: %w", mode, err)
		}
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
	}
	return nil
}

// benchSweepSpec is the sweep both modes run: the same trials (seed,
// parameters, scheduler), only the template's worker range differs.
func benchSweepSpec(mode string, slots, trials, concurrent int, seed, grace, maxSteps int64, widths []any) sweep.Spec {
	size := slots / concurrent
	workers := jobs.WorkerRange{Min: size, Max: size}
	if mode == "elastic" {
		workers.Max = slots
	}
	const batch = 256
	samples := int(maxSteps) * batch / 2 // two epochs of max/2 steps
	return sweep.Spec{
		Name: "bench-" + mode,
		Template: jobs.Spec{Name: "trial", Workers: workers,
			Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
				Model:   jobs.MLPModel{Hidden: []int{512}},
				Dataset: jobs.SyntheticDataset{Seed: 7, Samples: samples, Features: 128, Classes: 10, Partitions: 64},
				Epochs:  2, BatchSize: batch, LearningRate: 0.05, Momentum: 0.9,
			}}},
		Parameters: map[string]sweep.Parameter{
			"trainer.builtin.lr":             {Type: sweep.LogUniform, Min: ptr(0.001), Max: ptr(0.5)},
			"trainer.builtin.model.hidden.0": {Type: sweep.Choice, Values: widths},
		},
		NumTrials: trials, MaxConcurrent: concurrent, Seed: seed,
		Metric:    sweep.Metric{Name: "loss", Mode: sweep.Min},
		Scheduler: sweep.Scheduler{Kind: "asha", Grace: grace, Max: maxSteps, ReductionFactor: 4},
	}
}

func ptr(x float64) *float64 { return &x }

// sweepOnce runs spec on a fresh edl dev and measures it.
func sweepOnce(ctx context.Context, env Env, mode string, spec sweep.Spec, slots int, sample time.Duration, events io.Writer) (sweepResult, error) {
	dir, err := os.MkdirTemp("", "edl-bench-sweep-")
	if err != nil {
		return sweepResult{}, err
	}
	defer os.RemoveAll(dir)
	d, err := env.StartDev(ctx, DevConfig{Listen: "127.0.0.1:0", DataDir: dir, Slots: slots, Grace: 10 * time.Second,
		Cooldown: time.Second, Interval: 100 * time.Millisecond, WorkerLogLevel: "warn"}, cli.NewLogger(io.Discard, 0, false))
	if err != nil {
		return sweepResult{}, err
	}
	defer d.Shutdown()
	res := sweepResult{Mode: mode, Slots: slots, Trials: spec.NumTrials, Concurrency: spec.MaxConcurrent}
	t0 := time.Now()
	var sw sweep.Sweep
	if err := d.API(ctx, "POST", "/v1/sweeps", spec, &sw); err != nil {
		return res, err
	}
	res.SweepID = sw.ID
	tick := time.NewTicker(sample)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("sweep %s not done after %s: %w", sw.ID, time.Since(t0).Round(time.Second), ctx.Err())
		case <-tick.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		used, err := d.usedSlots(ctx)
		if err != nil {
			return res, err
		}
		res.SlotSUsed += float64(used) * dt
		res.SlotSIdle += float64(slots-used) * dt
		if err := d.API(ctx, "GET", "/v1/sweeps/"+sw.ID, nil, &sw); err != nil {
			return res, err
		}
		if growable(sw, mode, slots) && used < slots {
			res.IdleGrowS += float64(slots-used) * dt
		}
		for _, t := range sw.Trials {
			res.MaxWorkers = max(res.MaxWorkers, t.Workers)
		}
		if sw.State.Terminal() {
			break
		}
	}
	res.WallS = time.Since(t0).Seconds()
	if sw.State != sweep.Succeeded {
		return res, fmt.Errorf("sweep %s ended %s", sw.ID, sw.State)
	}
	n := sw.TrialCounts()
	res.Cut, res.Completed = n[sweep.TrialCut], n[sweep.TrialCompleted]
	var page struct {
		Events []sweep.Event `json:"events"`
	}
	if err := d.API(ctx, "GET", "/v1/sweeps/"+sw.ID+"/events?limit=500", nil, &page); err != nil {
		return res, err
	}
	for _, e := range page.Events {
		if events != nil {
			fmt.Fprintf(events, "%s %6.2fs %s\n", mode, e.Time.Sub(t0).Seconds(), e.Message)
		}
		if e.Type == sweep.EventGrown {
			res.Grown++
		}
	}
	if sw.Best != nil {
		res.BestTrial, res.BestMetric, res.BestIndex = sw.Best.Params, sw.Best.Metric, sw.Best.Trial
	}
	return res, nil
}

// growable says whether a running trial of the elastic sweep is below its
// maximum with no trial left to start: a free slot then is one a
// survivor could have had.
func growable(sw sweep.Sweep, mode string, slots int) bool {
	if mode != "elastic" {
		return false
	}
	for _, t := range sw.Trials {
		if t.State == sweep.TrialPending {
			return false
		}
	}
	for _, t := range sw.Trials {
		if t.State == sweep.TrialRunning && t.Workers < slots {
			return true
		}
	}
	return false
}

// usedSlots is how many CPU slots the cluster's workers hold now.
func (d *Dev) usedSlots(ctx context.Context) (int, error) {
	c, err := d.Cluster.Capacity(ctx)
	if err != nil {
		return 0, err
	}
	used := 0
	for _, n := range c.Nodes {
		used += n.CPUSlots - n.FreeCPUSlots
	}
	return used, nil
}
