package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/edl-nomad/edl/planner/loop"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// redisSpeeds reads the step times workers publish in their job's speed
// hash (worker/coord Keys.Speed) for the planner's straggler check.
type redisSpeeds struct {
	rdb    redis.UniversalClient
	prefix string // the workers' key prefix
}

var _ loop.WorkerSpeeds = redisSpeeds{}

func (s redisSpeeds) StepMillis(ctx context.Context, jobID string) (map[string]float64, error) {
	h, err := s.rdb.HGetAll(ctx, coord.NewKeys(s.prefix, jobID).Speed()).Result()
	if err != nil {
		return nil, fmt.Errorf("step times of %s: %w", jobID, err)
	}
	out := make(map[string]float64, len(h))
	for w, v := range h {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			out[w] = ms
		}
	}
	return out, nil
}

// stragglerSpeeds is the planner's WorkerSpeeds for --straggler-factor:
// nil (replacement off) when the factor is 0.
func stragglerSpeeds(factor float64, rdb redis.UniversalClient, prefix string) loop.WorkerSpeeds {
	if factor == 0 {
		return nil
	}
	return redisSpeeds{rdb: rdb, prefix: prefix}
}

// addStragglerFlags registers --straggler-factor and --straggler-rounds.
func addStragglerFlags(fs *flag.FlagSet, factor *float64, rounds *int) {
	d := loop.DefaultConfig()
	fs.Float64Var(factor, "straggler-factor", d.StragglerFactor, "replace a worker whose step time stays above this times its job's median (0 disables)")
	fs.IntVar(rounds, "straggler-rounds", d.StragglerRounds, "planner rounds in a row a worker must be that slow before it is replaced")
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
