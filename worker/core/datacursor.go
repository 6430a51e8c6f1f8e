package core

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// cursor is where a worker is in its current partition.
type cursor struct {
	Part   int // -1: none held
	Off    int64
	Size   int64
	noMore bool // the epoch's queue is empty for this worker
}

// DataCursor is a worker's side of the data pipeline (datapipe): the
// partition it holds, the commits of its applied steps, and the data
// set's layout it claims from. It knows the training counters only as
// arguments (epoch, the last applied step), never the model.
//
// Invariants (the exactly-once mechanisms of datapipe/doc.go that live
// here; the rest are in the Lua scripts):
//   - cur.part >= 0: this worker owns partition cur.part of the current
//     epoch in Redis, and cur.off is the end of its samples used by the
//     last applied step (or the offset the claim returned); cur.size is
//     the partition's size. cur.part < 0: it holds none.
//   - flush before claim: claim lands every commit queued so far (the one
//     that finished the previous partition included) before it claims
//     another; a worker that cannot flush takes part in the next step with
//     nothing (blocked).
//   - asOf: a claim is stamped with the claimer's last applied step.
//   - applied moves cur.off only for a step that was applied, and queues
//     its commit for that step: the cursor never runs ahead of the
//     training state.
//   - at every generation start the cursor is reset (restart: the claim
//     returns this worker's own unfinished partition at its reconciled
//     offset) or, when every member kept its state, keeps its partition
//     but forgets noMore (keep).
type DataCursor struct {
	Pipe *datapipe.Pipe
	Com  *committer
	log  *slog.Logger
	Cur  cursor

	// The data set's layout: parts partitions, in an order shuffled per
	// epoch by seed; size(p) is partition p's number of samples.
	Parts int
	Seed  int64
	Size  func(part int) int64
}

func NewDataCursor(pipe *datapipe.Pipe, log *slog.Logger) DataCursor {
	return DataCursor{Pipe: pipe, Com: newCommitter(pipe, log), log: log, Cur: cursor{Part: -1}}
}

// Restart drops the partition held: the next claim asks Redis, which
// returns this worker's own unfinished partition at its committed
// offset first. For a generation start and an epoch's end.
func (d *DataCursor) Restart() { d.Cur = cursor{Part: -1} }

// Keep keeps the partition held across a switch in which every member
// kept its state, but forgets that the queue was empty: a leave or a
// failure may just have put partitions back in it, and a member that
// believed it empty would never claim them (samples missed).
func (d *DataCursor) Keep() { d.Cur.noMore = false }

// Claim makes sure the worker holds a partition of epoch with samples
// left, claiming one as of step asOf (its last applied step) in
// generation gen if needed. blocked: Redis could not be reached (within
// wait, for the flush and the claim); stale: gen is no longer current.
func (d *DataCursor) Claim(ctx context.Context, wait time.Duration, gen int64, epoch int, asOf int64) (blocked, stale bool) {
	if d.Cur.Part >= 0 && d.Cur.Off < d.Cur.Size || d.Cur.noMore {
		return false, false
	}
	// A finished partition's last commit must land before this worker takes
	// part in another step: the root of a later generation relies on it.
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := d.Com.Flush(fctx); err != nil {
		return true, false
	}
	order := datapipe.Order(d.Parts, d.Seed, epoch)
	part, off, err := d.Pipe.Claim(fctx, gen, epoch, asOf, order)
	switch {
	case errors.Is(err, datapipe.ErrStaleGeneration):
		return false, true
	case err != nil:
		d.log.Warn("claim failed", "err", err)
		return true, false
	case part < 0:
		d.Cur = cursor{Part: -1, noMore: true}
	default:
		size := d.Size(part)
		d.Cur = cursor{Part: part, Off: off, Size: size}
		if off >= size {
			// Used up but not marked so: mark it and look again next step.
			d.Com.add(&datapipe.Commit{Gen: gen, Step: asOf + 1, Epoch: epoch, Part: part, Offset: off, Fin: true})
			d.Cur = cursor{Part: -1}
			return true, false
		}
	}
	return false, false
}

// Take is this rank's slot for a step that uses the next n samples of
// its partition (n from the data set, at most what is left: ShareSize);
// the cursor does not move until the step is applied.
func (d *DataCursor) Take(n int, leaving bool) Slot {
	end := d.Cur.Off + int64(n)
	return Slot{Part: d.Cur.Part, Start: d.Cur.Off, End: end, Leaving: leaving, Fin: end >= d.Cur.Size}
}

// Left is how many samples of the partition held are not used yet (0
// when none is held).
func (d *DataCursor) Left() int64 {
	if d.Cur.Part < 0 {
		return 0
	}
	return max(d.Cur.Size-d.Cur.Off, 0)
}

// ShareSize is how many of the left samples of its partition a rank
// whose batch (its share of the step under the job's batch policy) is
// batch takes in a step: batch; all that is left when that is less; and
// all that is left, batch+1, when taking batch would leave a single
// sample behind. So a partition's tail merges into the batch before it
// instead of ending in a one-sample batch (BatchNorm in training mode
// refuses one, and it is a noisy step): no share leaves a single sample
// behind, and no rank gets a one-sample batch unless its batch is 1 or
// the partition, or what a resize or restore left of it, holds a single
// sample. Pure: the decision depends on left
// and batch alone, so a world change mid-partition (a new batch at the
// same offset) needs nothing more, and every offset a share ends at is
// one a later share (or a claim at a committed offset) starts from.
func ShareSize(left int64, batch int) int {
	switch {
	case left <= 0 || batch < 1:
		return 0
	case left <= int64(batch):
		return int(left)
	case left == int64(batch)+1:
		return batch + 1
	}
	return batch
}

// Applied records this rank's slot my of step `step` (applied in
// generation gen, epoch epoch): the cursor moves to its end and the
// commit is queued, with the step's debug records (my.Part < 0: nothing
// consumed, only the records).
func (d *DataCursor) Applied(gen, step int64, epoch int, my Slot, debug ...datapipe.DebugRecord) {
	var cm *datapipe.Commit
	if my.Part >= 0 {
		d.Cur.Off = my.End
		cm = &datapipe.Commit{Gen: gen, Step: step, Epoch: epoch, Part: my.Part, Offset: my.End, Fin: my.Fin}
	}
	d.Com.add(cm, debug...)
}

// SeenGen is the newest generation number Redis reported to a commit.
func (d *DataCursor) SeenGen() int64 { return d.Com.seenGen.Load() }

// Reconcile puts the data pipeline where the root's training state st
// says it stands at the start of generation g (datapipe/doc.go:
// consumption at L, the rollback, the fence), retrying while Redis is
// away; returned: partitions put back in the queue.
func (d *DataCursor) Reconcile(ctx context.Context, g *coord.Generation, st ProgressState) (returned int, err error) {
	rec := datapipe.Reconciliation{Gen: g.Number, Applied: st.Applied, Epoch: st.Epoch,
		MetaEpoch: st.MetaEpoch, Members: g.Members, Meta: st.Meta, Debug: st.Debug}
	err = Retry(ctx, d.log, "reconcile", func() (err error) {
		returned, err = d.Pipe.Reconcile(ctx, rec)
		return err
	})
	return returned, err
}

// HandBack is a leaver's last word on the data: its commits landed, its
// partitions of epoch and the next put back in the queue.
func (d *DataCursor) HandBack(ctx context.Context, epoch int) {
	if err := d.Com.Flush(ctx); err != nil {
		d.log.Warn("flush commits before leaving", "err", err)
	}
	if err := d.Pipe.Release(ctx, epoch, epoch+1); err != nil {
		d.log.Warn("release partitions", "err", err)
	}
}
