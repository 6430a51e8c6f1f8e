package datapipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// EpochState is one epoch's queue and partition records as of a step
// boundary: what a checkpoint carries so a restored job resumes its data
// pipeline exactly where the checkpoint's state left it.
type EpochState struct {
	Epoch int               `json:"epoch"`
	Init  bool              `json:"init"`  // the queue was created
	Todo  []string          `json:"todo"`  // partitions not claimed, in order
	Parts map[string]string `json:"parts"` // partition -> record
}

// Snapshot reads the given epochs' queues and records in one transaction.
func (p *Pipe) Snapshot(ctx context.Context, epochs ...int) ([]EpochState, error) {
	type cmds struct {
		init  *redis.IntCmd
		todo  *redis.StringSliceCmd
		parts *redis.MapStringStringCmd
	}
	cs := make([]cmds, len(epochs))
	_, err := p.rdb.TxPipelined(ctx, func(pp redis.Pipeliner) error {
		for i, e := range epochs {
			cs[i] = cmds{pp.Exists(ctx, p.keys.EpochInit(e)), pp.LRange(ctx, p.keys.Todo(e), 0, -1), pp.HGetAll(ctx, p.keys.Parts(e))}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot data pipeline: %w", err)
	}
	out := make([]EpochState, len(epochs))
	for i, e := range epochs {
		out[i] = EpochState{Epoch: e, Init: cs[i].init.Val() > 0, Todo: cs[i].todo.Val(), Parts: cs[i].parts.Val()}
	}
	return out, nil
}

// Restore replaces the queues and records of epochs [0, epochs) by states
// (epochs not in states end up empty, as before their first claim) and
// drops the debug records of steps after applied. The caller then runs
// Reconcile, as the root of any new generation does. gen is the caller's
// generation: Restore fails with ErrStaleGeneration, writing nothing, when a
// newer one exists (its members may be using the pipeline already).
func (p *Pipe) Restore(ctx context.Context, gen int64, epochs int, states []EpochState, applied int64) error {
	err := p.rdb.Watch(ctx, func(tx *redis.Tx) error {
		cur, err := tx.Get(ctx, p.keys.GenNum()).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if cur > gen {
			return ErrStaleGeneration
		}
		steps, err := tx.HKeys(ctx, p.keys.Debug()).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(pp redis.Pipeliner) error {
			for e := range max(epochs, 0) + 1 {
				pp.Del(ctx, p.keys.EpochInit(e), p.keys.Todo(e), p.keys.Parts(e))
			}
			for _, s := range states {
				if s.Init {
					pp.Set(ctx, p.keys.EpochInit(s.Epoch), "1", 0)
				}
				if len(s.Todo) > 0 {
					args := make([]any, len(s.Todo))
					for i, t := range s.Todo {
						args[i] = t
					}
					pp.RPush(ctx, p.keys.Todo(s.Epoch), args...)
				}
				if len(s.Parts) > 0 {
					pp.HSet(ctx, p.keys.Parts(s.Epoch), s.Parts)
				}
			}
			var drop []string
			for _, st := range steps {
				var n int64
				if _, err := fmt.Sscan(st, &n); err == nil && n > applied {
					drop = append(drop, st)
				}
			}
			if len(drop) > 0 {
				pp.HDel(ctx, p.keys.Debug(), drop...)
			}
			return nil
		})
		return err
	}, p.keys.GenNum(), p.keys.Debug())
	if err != nil {
		return fmt.Errorf("restore data pipeline at step %d for generation %d: %w", applied, gen, err)
	}
	return nil
}
