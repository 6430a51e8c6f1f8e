package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
	"github.com/edl-nomad/edl/planner/loop"
	"github.com/edl-nomad/edl/worker"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// redisSpeeds reads the step times workers publish in their job's speed
// hash (worker/coord Keys.Speed, values worker.SpeedFigure) for the
// planner's straggler check, and the workers' done marker.
type redisSpeeds struct {
	rdb    redis.UniversalClient
	prefix string // the workers' key prefix
}

var (
	_ loop.WorkerSpeeds = redisSpeeds{}
	_ loop.JobDone      = redisSpeeds{}
)

func (s redisSpeeds) StepTimes(ctx context.Context, jobID string) (map[string]planner.WorkerSpeed, error) {
	h, err := s.rdb.HGetAll(ctx, coord.NewKeys(s.prefix, jobID).Speed()).Result()
	if err != nil {
		return nil, fmt.Errorf("step times of %s: %w", jobID, err)
	}
	out := make(map[string]planner.WorkerSpeed, len(h))
	for w, v := range h {
		f, err := worker.ParseSpeedFigure(v)
		if err != nil {
			continue
		}
		if f.AtUnixMilli == 0 {
			// An older worker's bare number: no generation, no time, so
			// neither compared nor taken for silence.
			continue
		}
		out[w] = planner.WorkerSpeed{ID: w, Published: true, StepMillis: f.StepMillis, Generation: f.Generation,
			WorldSize: f.WorldSize, At: f.At()}
	}
	return out, nil
}

// JobDone reads the done marker the job's leader sets when training ends.
func (s redisSpeeds) JobDone(ctx context.Context, jobID string) (jobs.State, error) {
	v, err := s.rdb.Get(ctx, coord.NewKeys(s.prefix, jobID).Done()).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("done marker of %s: %w", jobID, err)
	}
	return jobs.State(v), nil
}

// plannerWorkers wires what the planner reads of the workers into lc:
// their step times (off with --straggler-factor 0) and their done marker.
func plannerWorkers(lc *loop.Config, factor float64, rounds int, rdb redis.UniversalClient, prefix string) {
	rs := redisSpeeds{rdb: rdb, prefix: prefix}
	lc.Done = rs
	lc.Policy.Straggler.Factor, lc.Policy.Straggler.Rounds = factor, rounds
	if factor > 0 {
		lc.Speeds = rs
	}
}

// addStragglerFlags registers --straggler-factor and --straggler-rounds.
func addStragglerFlags(fs *flag.FlagSet, factor *float64, rounds *int) {
	d := planner.DefaultStragglerConfig()
	fs.Float64Var(factor, "straggler-factor", d.Factor, "replace a worker whose step time stays above this times its job's median (0 disables)")
	fs.IntVar(rounds, "straggler-rounds", d.Rounds, "planner rounds in a row a worker must be that slow before it is replaced")
}

func checkStragglerFlags(cmd string, factor float64, rounds int) error {
	if factor != 0 && factor <= 1 {
		return usageErrorf("%s: --straggler-factor %g: must be 0 (off) or above 1", cmd, factor)
	}
	if rounds < 1 {
		return usageErrorf("%s: --straggler-rounds %d: must be at least 1", cmd, rounds)
	}
	return nil
}
