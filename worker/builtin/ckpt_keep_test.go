package builtin

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/core"
)

// Epoch-end checkpoints escaped spec.checkpoint.keep (8 kept with keep 3):
// the worker's catalog also kept the newest of every epoch. Retention now
// keeps the newest keep checkpoints, whatever wrote them.
func TestCheckpointRetentionHonoursKeep(t *testing.T) {
	spec := jobs.Spec{Checkpoint: jobs.CheckpointPolicy{EverySteps: 10, Keep: 3}}
	store, err := checkpoint.Open(context.Background(), "file://"+t.TempDir(), checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := checkpoint.NewCatalog(store, core.CatalogConfig("j-keep", spec, slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Eight epochs, an epoch-end checkpoint each, plus step checkpoints.
	for epoch := range 8 {
		for _, step := range []int64{int64(epoch*100 + 50), int64(epoch*100 + 99)} {
			body := []byte(fmt.Sprint(step))
			shards := []checkpoint.ShardSource{{Name: checkpoint.ShardParams, Size: int64(len(body)), Body: bytes.NewReader(body)}}
			if _, err := cat.Write(ctx, checkpoint.Meta{Step: step, Epoch: epoch}, shards); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cat.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := cat.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, m := range list {
		steps = append(steps, m.Step)
	}
	if fmt.Sprint(steps) != "[799 750 699]" && fmt.Sprint(steps) != "[699 750 799]" {
		t.Errorf("kept %v with keep 3; want the newest three (699 750 799)", steps)
	}
}
