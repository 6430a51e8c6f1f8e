package builtin

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
)

// Ring generation numbers: generation G's hand-over ring (root and joiners
// only) is 2G and its main ring 2G+1, so the Transport sees them in order
// and a member that skips the hand-over simply goes from 2G-1 to 2G+1.
func handOverRing(gen int64) int64 { return 2 * gen }
func mainRing(gen int64) int64     { return 2*gen + 1 }

// pendingState is a joiner's state on its way from the root: the joiner
// takes part in its first step's all-reduce with nothing (no samples, a
// zero gradient) while the state arrives, and loads it before it applies
// that step, so the existing members never wait for the transfer.
type pendingState struct {
	gen   int64
	done  chan struct{}
	st    core.ProgressState
	model []byte
	err   error
}

// handOver gives the joiners of a generation that admits workers without a
// failure the root's state directly, over a ring of the root and the
// joiners alone, while the other members go straight to the main ring and
// keep their state. Only the hand-over ring is built here; the transfer
// runs in the background (root: a snapshot taken now; joiner: w.ts.pending).
// Members that are neither root nor joiner do nothing.
func (w *Worker) handOver(ctx context.Context, g *coord.Generation) error {
	if !w.cfg.DirectHandOver || len(g.Joiners) == 0 || g.Sync || g.Root < 0 || g.Restore {
		return nil
	}
	ids := append([]string{g.Members[g.Root]}, g.Joiners...)
	rank := slices.Index(ids, w.cfg.Worker)
	if rank < 0 || (rank == 0 && !w.ts.synced) {
		return nil
	}
	addrs := make([]string, len(ids))
	for i, id := range ids {
		addrs[i] = g.Addrs[g.Rank(id)]
	}
	start := time.Now()
	timeout := w.cfg.RingTimeout
	if rank > 0 {
		timeout = w.cfg.JoinTimeout
	}
	ring, err := w.deps.Transport.NewRing(ctx, collective.RingConfig{
		Generation: handOverRing(g.Number), Rank: rank, Peers: addrs, Timeout: timeout,
	})
	if err != nil {
		return fmt.Errorf("build hand-over ring: %w", err)
	}
	w.sw.mark("handover_ring")
	// The transfer outlives join: it is bounded by the ring timeout, not ctx.
	if rank == 0 {
		// The snapshot is taken off the step loop: the first step's
		// gradient only reads the parameters, and apply waits for it
		// (waitSnapshot) before the update changes them.
		hdr := core.EncodeHeader(w.ts.st, 8*w.ts.model.NumParams()+1024)
		snap := make(chan struct{})
		w.ts.snap = snap
		go func() {
			defer ring.Close()
			payload := w.ts.model.AppendState(hdr, w.ts.opt)
			close(snap)
			if _, err := ring.Broadcast(context.Background(), 0, payload); err != nil {
				w.log.Warn("state hand-over failed", "gen", g.Number, "to", g.Joiners, "err", err)
				return
			}
			w.log.Info("handed state over", "gen", g.Number, "to", g.Joiners, "bytes", len(payload), "took", time.Since(start).Round(time.Millisecond))
		}()
		return nil
	}
	p := &pendingState{gen: g.Number, done: make(chan struct{})}
	w.ts.pending = p
	w.ts.synced = false // whatever it held from an earlier membership is stale
	go func() {
		defer close(p.done)
		defer ring.Close()
		payload, err := ring.Broadcast(context.Background(), 0, nil)
		if err != nil {
			p.err = fmt.Errorf("receive state: %w", err)
			return
		}
		p.st, p.model, p.err = core.DecodeState(payload)
		w.log.Info("state received", "gen", g.Number, "step", p.st.Applied, "bytes", len(payload), "took", time.Since(start).Round(time.Millisecond))
	}()
	return nil
}
