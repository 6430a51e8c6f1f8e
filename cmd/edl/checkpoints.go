package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker"
)

// checkpointView adapts the checkpoint store to the API's checkpoint routes.
type checkpointView struct{ store checkpoint.Store }

var _ api.CheckpointView = checkpointView{}

func (v checkpointView) ListCheckpoints(ctx context.Context, jobID string) ([]api.Checkpoint, error) {
	ms, err := checkpoint.List(ctx, v.store, worker.CheckpointJob(jobID))
	if err != nil {
		return nil, err
	}
	out := make([]api.Checkpoint, 0, len(ms))
	for _, m := range ms {
		c := api.Checkpoint{Step: m.Step, Epoch: m.Epoch, Generation: m.Generation, WorldSize: m.WorldSize,
			SizeBytes: m.Size(), CreatedAt: m.CreatedAt}
		for _, s := range m.Shards {
			c.Shards = append(c.Shards, api.CheckpointShard{Name: s.Name, Size: s.Size, SHA256: s.SHA256})
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step > out[j].Step })
	return out, nil
}

func (v checkpointView) OpenModel(ctx context.Context, jobID string, step int64) (io.ReadCloser, api.CheckpointShard, error) {
	rc, m, err := checkpoint.OpenModel(ctx, v.store, worker.CheckpointJob(jobID), step)
	if err != nil {
		if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrNoCheckpoint) {
			return nil, api.CheckpointShard{}, fmt.Errorf("checkpoint at step %d: %w", step, jobs.ErrNotFound)
		}
		return nil, api.CheckpointShard{}, err
	}
	sh, _ := m.Shard(checkpoint.ShardParams)
	return rc, api.CheckpointShard{Name: sh.Name, Size: sh.Size, SHA256: sh.SHA256}, nil
}
