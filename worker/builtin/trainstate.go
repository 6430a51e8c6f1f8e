package builtin

import (
	"context"
	"fmt"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/trainer"
)

// trainState is a worker's training state: the model, the optimizer and
// the counters of the last applied step (progressState), and a hand-over
// of them in flight either way. It knows nothing of Redis or rings: join,
// handOver and the step loop move it; it keeps itself consistent.
//
// Invariants:
//   - synced: st, model and opt are one training state, the one after
//     applied step st.Applied (-1: the seed, before the first step); only
//     a synced member may be a generation's root or vote "have" in
//     sameState. Not synced: before the first generation, and while a
//     joiner's state is on its way (pending).
//   - st.Meta is every rank's consumption in step st.Applied, st.MetaEpoch
//     its epoch and st.Debug its debug record: if this member is the root
//     of the next generation, reconcile puts the data where they say
//     (datapipe/doc.go: consumption at L).
//   - pending != nil: the direct hand-over of generation pending.gen is on
//     its way and synced is false; takePending loads it before this worker
//     applies its first step in that generation, and a full broadcast or a
//     failure drops it (dropPending).
//   - snap != nil: the root's hand-over snapshot is being copied from
//     model and opt, which must not change (update, a state received, a
//     restore) before waitSnapshot returned.
//   - handedGen is the generation whose direct hand-over gave this worker
//     its state (0: none).
type trainState struct {
	mc    trainer.ModelConfig
	model *trainer.Model
	opt   *trainer.SGD

	st        core.ProgressState
	synced    bool
	handedGen int64
	pending   *pendingState
	// snap is closed once the root's hand-over snapshot of the parameters
	// and velocity is taken; they must not change before (waitSnapshot).
	snap chan struct{}
}

// reset builds the model and optimizer from the seed (mc, bt's learning
// rate and momentum) and sets the counters to "no step applied".
func (t *trainState) reset(bt *jobs.BuiltinTrainer) error {
	m, err := trainer.NewModel(t.mc)
	if err != nil {
		return err
	}
	t.model = m
	t.opt = trainer.NewSGD(m.NumParams(), float32(bt.LearningRate), float32(bt.Momentum))
	t.st = core.ProgressState{Applied: -1}
	return nil
}

// encode is the whole state (counters, parameters, velocity) in the
// format of a broadcast and of a saved file (encodeState).
func (t *trainState) encode() []byte { return core.EncodeState(t.st, t.model.MarshalState(t.opt)) }

// loadState decodes a training state (a broadcast or a saved file) and loads
// its model and optimizer; the caller adopts the counters.
func (t *trainState) loadState(b []byte) (core.ProgressState, error) {
	st, model, err := core.DecodeState(b)
	if err != nil {
		return st, err
	}
	if err := t.model.UnmarshalState(model, t.opt); err != nil {
		return st, fmt.Errorf("load state: %w", err)
	}
	return st, nil
}

// update applies a summed gradient of total samples with learning rate
// lr: the parameters change, so the hand-over snapshot is waited for.
// The counters are the caller's (apply).
func (t *trainState) update(grad []float32, total int, lr float32) {
	t.waitSnapshot()
	k := 1 / float32(total)
	for i := range grad {
		grad[i] *= k
	}
	t.opt.LR = lr
	t.opt.Step(t.model.Params(), grad)
}

// waitSnapshot waits until the root's hand-over snapshot is taken; the
// parameters and velocity must not change before.
func (t *trainState) waitSnapshot() {
	if t.snap != nil {
		<-t.snap
		t.snap = nil
	}
}

// takePending waits for the state being handed over and loads it; the
// caller restarts its data cursor (the state's step is not its own).
func (t *trainState) takePending(ctx context.Context) error {
	p := t.pending
	if p == nil {
		return nil
	}
	t.pending = nil
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.err != nil {
		return p.err
	}
	if err := t.model.UnmarshalState(p.model, t.opt); err != nil {
		return fmt.Errorf("load state: %w", err)
	}
	t.st, t.synced, t.handedGen = p.st, true, p.gen
	return nil
}

// dropPending forgets a hand-over in progress (a full broadcast or a
// failure replaces it); the transfer ends by itself.
func (t *trainState) dropPending() {
	t.pending = nil
}
