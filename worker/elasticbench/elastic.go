package elasticbench

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
)

func (b *bench) workerArgs(job, id string, extra ...string) []string {
	return append([]string{"--job", job, "--redis", b.redis, "--worker-id", id, "--debug-samples"}, extra...)
}

func (b *bench) elastic(ctx context.Context, res *Result) error {
	job := "elastic"
	n := b.cfg.Workers
	names := make([]string, 0, n+1)
	for i := range n {
		id := fmt.Sprintf("e%d", i)
		names = append(names, id)
		b.start(id, b.workerArgs(job, id, "--min-start", strconv.Itoa(n))...)
	}
	timeout := 5 * time.Minute
	lines, err := b.waitSteps(ctx, names[0], b.cfg.Warmup, timeout)
	if err != nil {
		return err
	}
	step := medianInterval(lines[len(lines)/2:])
	res.StepMS = ms(step)
	gen := lines[len(lines)-1].Gen

	// Scale out n -> n+1: the longest stall of an existing worker.
	b.start("join", b.workerArgs(job, "join")...)
	if _, err := b.waitSteps(ctx, "join", b.cfg.Between, timeout); err != nil {
		return err
	}
	gap := b.longestGap(names, gen)
	res.ScaleOutGapMS, res.ScaleOutPauseMS = ms(gap), ms(max(gap-step, 0))
	gen = b.lastGen("join")

	// Scale in n+1 -> n: the newcomer leaves gracefully.
	_ = b.procs["join"].Process.Signal(syscall.SIGTERM)
	if err := b.procs["join"].Wait(); err != nil {
		return fmt.Errorf("graceful leave: %w", err)
	}
	if _, err := b.waitSteps(ctx, names[0], len(readSteps(b.logPath(names[0])))+b.cfg.Between, timeout); err != nil {
		return err
	}
	gap = b.longestGap(names, gen)
	res.ScaleInGapMS, res.ScaleInPauseMS = ms(gap), ms(max(gap-step, 0))

	// Failure: SIGKILL one worker that is not the leader.
	leader, _ := b.rdb.Get(ctx, coord.NewKeys("edl:", job).Leader()).Result()
	victim := names[len(names)-1]
	if victim == leader {
		victim = names[len(names)-2]
	}
	killed := time.Now()
	_ = b.procs[victim].Process.Signal(syscall.SIGKILL)
	_ = b.procs[victim].Wait()
	survivor := names[0]
	if survivor == victim {
		survivor = names[1]
	}
	deadline := time.Now().Add(timeout)
	for res.FailureRecoveryMS == 0 {
		for _, l := range readSteps(b.logPath(survivor)) {
			if l.At.After(killed) && l.World == n-1 {
				res.FailureRecoveryMS = ms(l.At.Sub(killed))
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no step after the SIGKILL of %s within %s", victim, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Let the job finish, then account for every sample.
	for _, id := range names {
		if id == victim {
			continue
		}
		if err := b.procs[id].Wait(); err != nil {
			return fmt.Errorf("worker %s: %w", id, err)
		}
	}
	keys := coord.NewKeys("edl:", job)
	recs, err := datapipe.New(b.rdb, keys, "bench").DebugRecords(ctx)
	if err != nil {
		return err
	}
	bt := b.cfg.Spec.Trainer.Builtin
	res.SamplesMissed, res.SamplesRepeated, err = core.CheckSamples(recs, bt.Dataset, bt.Epochs)
	if err != nil {
		return err
	}
	res.ElasticAppliedStep = int64(len(recs))
	res.FinalLossElastic = round4(lastEpochLoss(readSteps(b.logPath(survivor))))
	return nil
}

// longestGap is the longest time any of names went without a step across
// the switch away from generation gen.
func (b *bench) longestGap(names []string, gen int64) time.Duration {
	var worst time.Duration
	for _, id := range names {
		if g, ok := switchGap(readSteps(b.logPath(id)), gen); ok && g > worst {
			worst = g
		}
	}
	return worst
}

func (b *bench) lastGen(name string) int64 {
	l := readSteps(b.logPath(name))
	if len(l) == 0 {
		return 0
	}
	return l[len(l)-1].Gen
}

// restart measures the TorchElastic way of going from n to n+1 workers:
// stop everyone at a step boundary, write the state to a file, start n+1
// fresh processes that restore it, until the first step.
func (b *bench) restart(ctx context.Context, res *Result) error {
	n := b.cfg.Workers
	state := b.dir + "/restart.state"
	var names []string
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		names = append(names, id)
		b.start(id, b.workerArgs("restart1", id, "--min-start", strconv.Itoa(n), "--save", state)...)
	}
	if _, err := b.waitSteps(ctx, names[0], 10, 5*time.Minute); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.rdb.Set(ctx, coord.NewKeys("edl:", "restart1").Stop(), "bench", 0).Err(); err != nil {
		return err
	}
	for _, id := range names {
		if err := b.procs[id].Wait(); err != nil {
			return fmt.Errorf("stop %s: %w", id, err)
		}
	}
	var next []string
	for i := range n + 1 {
		id := fmt.Sprintf("s%d", i)
		next = append(next, id)
		b.start(id, b.workerArgs("restart2", id, "--min-start", strconv.Itoa(n+1), "--restore", state)...)
	}
	lines, err := b.waitSteps(ctx, next[0], 1, 5*time.Minute)
	if err != nil {
		return err
	}
	res.RestartBaselineMS = ms(lines[0].At.Sub(t0))
	_ = b.rdb.Set(ctx, coord.NewKeys("edl:", "restart2").Stop(), "bench", 0).Err()
	for _, id := range next {
		_ = b.procs[id].Wait()
	}
	return nil
}
