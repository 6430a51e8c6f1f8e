package worker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/coord"
)

// Ring generation numbers: generation G's hand-over ring (root and joiners
// only) is 2G and its main ring 2G+1, so the Transport sees them in order
// and a member that skips the hand-over simply goes from 2G-1 to 2G+1.
func handOverRing(gen int64) int64 { return 2 * gen }
func mainRing(gen int64) int64     { return 2*gen + 1 }

// handOver gives the joiners of a generation that admits workers without a
// failure the root's state directly, over a ring of the root and the
// joiners alone, while the other members go straight to the main ring
// (where they wait for the joiners in the first step). Members that are
// neither root nor joiner do nothing. Afterwards every member holds the
// same state, so the main ring's check finds nothing to send.
func (w *Worker) handOver(ctx context.Context, g *coord.Generation) error {
	if !w.cfg.DirectHandOver || len(g.Joiners) == 0 || g.Sync || g.Root < 0 {
		return nil
	}
	ids := append([]string{g.Members[g.Root]}, g.Joiners...)
	rank := slices.Index(ids, w.cfg.Worker)
	if rank < 0 || (rank == 0 && !w.synced) {
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
	defer ring.Close()
	if rank == 0 {
		payload := w.model.AppendState(encodeHeader(w.st, 8*w.model.NumParams()+1024), w.opt)
		if _, err := ring.Broadcast(ctx, 0, payload); err != nil {
			return fmt.Errorf("send state: %w", err)
		}
		w.log.Info("handed state over", "gen", g.Number, "to", g.Joiners, "bytes", len(payload), "took", time.Since(start).Round(time.Millisecond))
		return nil
	}
	payload, err := ring.Broadcast(ctx, 0, nil)
	if err != nil {
		return fmt.Errorf("receive state: %w", err)
	}
	st, model, err := decodeState(payload)
	if err != nil {
		return err
	}
	if err := w.model.UnmarshalState(model, w.opt); err != nil {
		return fmt.Errorf("load state: %w", err)
	}
	w.st, w.synced = st, true
	w.cur = cursor{part: -1}
	w.log.Info("took state over", "gen", g.Number, "step", st.Applied, "bytes", len(payload), "took", time.Since(start).Round(time.Millisecond))
	return nil
}
