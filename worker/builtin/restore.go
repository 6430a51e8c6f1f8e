package builtin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// joinRestore starts a generation that no live worker holds the state of:
// rank 0 loads the newest good checkpoint (or starts from the seed when
// there is none), puts the data pipeline back where that state left it,
// and broadcasts the state to the others.
func (w *Worker) joinRestore(ctx context.Context, ring *collective.Ring, g *coord.Generation, rank int, start time.Time) error {
	if rank == 0 {
		if err := w.restoreState(ctx, g); err != nil {
			return err
		}
		if _, err := w.dc.Reconcile(ctx, g, w.ts.st); err != nil {
			return err
		}
		payload := w.ts.model.AppendState(core.EncodeHeader(w.ts.st, 8*w.ts.model.NumParams()+1024), w.ts.opt)
		if _, err := ring.Broadcast(ctx, 0, payload); err != nil {
			return fmt.Errorf("send state: %w", err)
		}
	} else {
		payload, err := ring.Broadcast(ctx, 0, nil)
		if err != nil {
			return fmt.Errorf("receive state: %w", err)
		}
		st, err := w.ts.loadState(payload)
		if err != nil {
			return err
		}
		w.ts.st = st
	}
	w.ts.synced = true
	w.dc.Restart()
	_ = w.mem.Register(ctx, coord.Active)
	w.joinedEvent(g, rank)
	w.log.Info("joined", "gen", g.Number, "rank", rank, "world", len(g.Members), "step", w.ts.st.Applied,
		"epoch", w.ts.st.Epoch, "restored", true, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// restoreState sets the model, optimizer, counters and data pipeline to the
// newest good checkpoint, or to the seed and an untouched pipeline.
func (w *Worker) restoreState(ctx context.Context, g *coord.Generation) error {
	var pipe []datapipe.EpochState
	found := false
	if w.ck != nil {
		var st core.ProgressState
		var err error
		if err := core.Retry(ctx, w.log, "restore checkpoint", func() error {
			found, st, pipe, err = w.ck.load(ctx)
			return err
		}); err != nil {
			return err
		}
		if found {
			w.ts.st = st
		}
	}
	if !found {
		if err := w.ts.reset(w.bt); err != nil {
			return err
		}
		if g.Restore {
			w.log.Warn("no checkpoint to restore: the job starts over from the seed", "gen", g.Number)
		}
	}
	err := core.Retry(ctx, w.log, "restore data pipeline", func() error {
		return w.dc.Pipe.Restore(ctx, g.Number, w.bt.Epochs, pipe, w.ts.st.Applied)
	})
	if err != nil {
		return errors.Join(errors.New("restore data pipeline"), err)
	}
	w.log.Info("state restored", "gen", g.Number, "from_checkpoint", found, "step", w.ts.st.Applied, "epoch", w.ts.st.Epoch)
	return nil
}
