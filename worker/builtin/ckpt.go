package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// trainerShard describes the model, for readers of the checkpoint.
type trainerShard struct {
	Dims   []int `json:"dims"`
	Params int   `json:"params"`
	// Format of the params shard: worker/trainer's state format (version
	// trainer.StateVersion) without velocity; the optimizer shard is the
	// SGD velocity as little-endian float32.
	Format string `json:"format"`
}

// checkpointer writes rank 0's checkpoints in the background and restores
// the newest one; nil when the worker has no store.
type checkpointer struct {
	w     *Worker
	cat   *checkpoint.Catalog
	up    *checkpoint.Uploader
	every int64
	size  int // bytes of the params shard
}

func newCheckpointer(w *Worker, store checkpoint.Store) (*checkpointer, error) {
	cat, err := checkpoint.NewCatalog(store, core.CatalogConfig(w.cfg.Job, w.spec, w.deps.Log))
	if err != nil {
		return nil, fmt.Errorf("worker: checkpoints: %w", err)
	}
	c := &checkpointer{w: w, cat: cat, every: int64(w.spec.Checkpoint.EverySteps), size: len(w.ts.model.MarshalState(nil))}
	c.up = checkpoint.NewUploader(cat, checkpoint.UploaderConfig{OnEvent: c.onEvent})
	return c, nil
}

func (c *checkpointer) onEvent(e checkpoint.Event) {
	core.ReportCheckpointEvent(c.w.log, c.w.rep, c.cat, e)
}

// due reports whether the step just applied calls for a periodic checkpoint.
func (c *checkpointer) due(applied int64) bool {
	return c != nil && c.every > 0 && applied >= 0 && (applied+1)%c.every == 0
}

// take snapshots the training state at this step boundary and uploads it
// in the background; with wait it also waits for the upload (and for one
// still in flight before it), for the checkpoint taken before every
// worker stops.
func (c *checkpointer) take(ctx context.Context, gen int64, world int, wait bool) {
	if c == nil || c.w.ts.st.Applied < 0 {
		return
	}
	w := c.w
	if wait {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, _ = c.up.Wait(wctx)
	}
	epochs := []int{w.ts.st.MetaEpoch}
	if w.ts.st.Epoch != w.ts.st.MetaEpoch {
		epochs = append(epochs, w.ts.st.Epoch)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	pipe, err := w.dc.Pipe.Snapshot(pctx, epochs...)
	cancel()
	if err != nil {
		w.log.Warn("checkpoint skipped", "step", w.ts.st.Applied, "err", err)
		w.rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint at step %d skipped: %v", w.ts.st.Applied, err),
			map[string]any{"step": w.ts.st.Applied, "skipped": true})
		return
	}
	data, _ := json.Marshal(core.DataShard{State: w.ts.st, Pipeline: pipe})
	meta := checkpoint.Meta{Step: w.ts.st.Applied, Epoch: w.ts.st.Epoch, Generation: gen, WorldSize: world,
		Labels: map[string]string{"loss": strconv.FormatFloat(w.ts.st.Loss, 'g', 6, 64), "samples": strconv.FormatInt(w.ts.st.Samples, 10)}}
	snap, err := c.up.Begin(meta)
	if err != nil {
		return // ErrBusy, reported by the uploader as skipped
	}
	w.ts.model.AppendState(snap.Buffer(checkpoint.ShardParams, c.size)[:0], nil)
	snap.AddFloat32s(checkpoint.ShardOptimizer, w.ts.opt.Velocity)
	snap.Add(checkpoint.ShardData, data)
	tr, _ := json.Marshal(trainerShard{Dims: w.ts.model.Dims(), Params: w.ts.model.NumParams(), Format: "edl-trainer-state-v1"})
	snap.Add(checkpoint.ShardTrainer, tr)
	c.up.Submit(snap)
	if wait {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if res, err := c.up.Wait(wctx); err != nil || res.Err != nil {
			w.log.Warn("final checkpoint not stored", "step", meta.Step, "err", errors.Join(err, res.Err))
		}
	}
}

// load restores the newest good checkpoint into the worker's model and
// optimizer; found is false when there is none.
func (c *checkpointer) load(ctx context.Context) (found bool, st core.ProgressState, pipe []datapipe.EpochState, err error) {
	w := c.w
	m, err := c.cat.Restore(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		b, err := core.ReadShard(ctx, cp, checkpoint.ShardParams)
		if err != nil {
			return err
		}
		if err := w.ts.model.UnmarshalState(b, nil); err != nil {
			return fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
		}
		rc, err := cp.Open(ctx, checkpoint.ShardOptimizer)
		if err != nil {
			return err
		}
		err = checkpoint.ReadFloat32s(rc, w.ts.opt.Velocity)
		rc.Close()
		if err != nil {
			return err
		}
		b, err = core.ReadShard(ctx, cp, checkpoint.ShardData)
		if err != nil {
			return err
		}
		var d core.DataShard
		if err := json.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%w: data shard: %v", checkpoint.ErrCorrupt, err)
		}
		st, pipe = d.State, d.Pipeline
		return nil
	}, func(s checkpoint.Skip) {
		w.rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint at step %d skipped at restore: %v", s.Step, s.Reason),
			map[string]any{"step": s.Step, "corrupt": true})
	})
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return false, st, nil, nil
	}
	if err != nil {
		return false, st, nil, err
	}
	w.rep.Event(jobs.EventCheckpoint, fmt.Sprintf("restored checkpoint at step %d (epoch %d)", m.Step, m.Epoch),
		map[string]any{"step": m.Step, "epoch": m.Epoch, "restored": true})
	return true, st, pipe, nil
}
