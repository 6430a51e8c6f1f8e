package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// Live mode's checkpoints (docs/live.md, "Checkpoints"). The program owns
// the model, the worker the training counters and the data pipeline; a
// checkpoint pairs them at one step boundary, as the built-in trainer's
// (ckpt.go: take) does:
//
//   - rank 0's worker applies step L, then (every checkpoint.every_steps
//     steps, at an epoch's end, at the end of training and when every
//     member leaves) snapshots the data pipeline (Pipe.Snapshot) with its
//     counters (progressState, the consumption at L included) before it
//     answers the program's "step"; the answer names a file;
//   - the program copies its State (model, optimizer, scheduler, RNG) and
//     writes it with torch.save beside training (python/edl/ckpt.py:
//     write to file.tmp, then rename); no other member can apply step L+1
//     before rank 0's program asked for it, so the pipeline snapshot is
//     that of step L up to what Reconcile's one-level rollback undoes;
//   - the worker waits for the file and uploads it with the snapshot
//     through the checkpoint Uploader (shards first, manifest last, at
//     most one in flight, spec.checkpoint.keep honoured by Prune).
//
// A generation that no member holds the state of (the job's first with a
// store, or one formed after every member died or left) restores: its
// rank 0's worker loads the newest checkpoint that verifies, puts the data
// pipeline back to the checkpoint's position (Pipe.Restore, then
// Reconcile, as joinRestore in restore.go), and hands the file to its
// program, which loads it and broadcasts it to the others as at any
// hand-over. The steps after the checkpoint are redone; their debug
// records are dropped with them (Pipe.Restore), so the per-sample
// accounting covers the final model's lineage.

const (
	// liveStateShard is a live checkpoint's program state: torch.save of
	// edl.torch.State.state_dict().
	liveStateShard = "torch-state"
	// liveCkptFormat names the format in the trainer shard.
	liveCkptFormat = "edl-live-torch-v1"
	// liveRestoreFile is the file a restored checkpoint's state is put in.
	liveRestoreFile = "live-restore.pt"
)

// liveCkptReply are the fields of a reply to the program about
// checkpoints (embedded in liveReply).
type liveCkptReply struct {
	// Checkpoint (a "step" reply): write the state after this step to this
	// file (torch.save to Checkpoint+".tmp", then rename; on error write
	// the message to Checkpoint+".err").
	Checkpoint string `json:"checkpoint,omitempty"`
	// Restore (a "gen" reply): load the state from this file before the
	// group is built.
	Restore string `json:"restore,omitempty"`
	// Save (a "gen" reply with action restart, or a "fallback" reply):
	// write the state to this file (as Checkpoint), then exit with
	// LiveExitRestart; the restarted program gets it back as Restore.
	Save string `json:"save,omitempty"`
}

// liveTrainerShard describes a live checkpoint, for its readers.
type liveTrainerShard struct {
	Format string `json:"format"`
	Shard  string `json:"shard"`
	Reason string `json:"reason"`
}

// liveCkpt takes rank 0's checkpoints and restores the newest one; nil
// when the worker has no checkpoint store.
type liveCkpt struct {
	w     *Worker
	cat   *checkpoint.Catalog
	up    *checkpoint.Uploader
	every int64
	// fileWait bounds the wait for the program's file.
	fileWait time.Duration
	// lastHolder: at the last step this worker applied, every other
	// member was flagged leaving, so once they are gone it holds the only
	// copy of the state; a leave before its next step checkpoints it
	// (beforeLeave) or the state is lost. Cleared by a join of a
	// generation with others in it: they may train on from the state.
	lastHolder bool
	// taken is the step of the newest checkpoint this worker took or
	// restored (-1: none).
	taken int64
}

func newLiveCkpt(w *Worker) (*liveCkpt, error) {
	if w.Deps.Store == nil {
		return nil, nil
	}
	cat, err := checkpoint.NewCatalog(w.Deps.Store, core.CatalogConfig(w.Cfg.Job, w.Spec, w.Deps.Log))
	if err != nil {
		return nil, fmt.Errorf("worker: checkpoints: %w", err)
	}
	c := &liveCkpt{w: w, cat: cat, every: int64(w.Spec.Checkpoint.EverySteps), fileWait: 5 * time.Minute, taken: -1}
	c.up = checkpoint.NewUploader(cat, checkpoint.UploaderConfig{OnEvent: c.onEvent})
	return c, nil
}

func (c *liveCkpt) run(ctx context.Context) {
	if c != nil {
		_ = c.up.Run(ctx)
	}
}

func (c *liveCkpt) onEvent(e checkpoint.Event) {
	core.ReportCheckpointEvent(c.w.Log, c.w.Rep, c.cat, e)
}

// liveCkptReason says whether the step just decided calls for a
// checkpoint on rank 0, and why ("" for none).
func liveCkptReason(v core.StepVerdict, applied, every int64, meta []int64, world int) string {
	leavers := 0
	for r := range world {
		if core.ReadSlot(meta, r).Leaving {
			leavers++
		}
	}
	switch {
	case v.Action == core.ActDone:
		return "end"
	case v.Action == core.ActStop:
		return ""
	case leavers == world && (v.Action == core.ActLeave || v.Action == core.ActSwitch):
		return "every member leaves"
	case v.EpochDone:
		return "epoch end"
	case v.Apply && every > 0 && applied >= 0 && (applied+1)%every == 0:
		return "period"
	}
	return ""
}

// afterStep is rank 0's checkpoint after a step: the file its program
// writes the state to, or "" for none.
func (c *liveCkpt) afterStep(ctx context.Context, g *coord.Generation, rank int, v core.StepVerdict, meta []int64) string {
	if c == nil {
		return ""
	}
	c.lastHolder = v.Apply && v.Action != core.ActLeave && othersLeaving(meta, len(g.Members), rank)
	if rank != 0 {
		return ""
	}
	reason := liveCkptReason(v, c.w.st.Applied, c.every, meta, len(g.Members))
	if reason == "" {
		return ""
	}
	return c.take(ctx, g, reason, reason == "end" || reason == "every member leaves")
}

// joined is a join of g: with others in it, they may train on from the
// state, so this worker is no longer its last holder.
func (c *liveCkpt) joined(g *coord.Generation) {
	if c != nil && len(g.Members) > 1 {
		c.lastHolder = false
	}
}

// othersLeaving reports whether every rank of a step's block but rank
// was flagged leaving (true for a world of one).
func othersLeaving(meta []int64, world, rank int) bool {
	for r := range world {
		if r != rank && !core.ReadSlot(meta, r).Leaving {
			return false
		}
	}
	return true
}

// beforeLeave is the checkpoint of a worker that leaves between steps (a
// leave request that came after its last step's share was handed out)
// while it holds the only copy of the state: every other member left at
// that step. Without it, preempting every worker of a job at once lost
// the model whenever the signals straddled a step's start: the members
// that saw theirs first left at that step, the others at the next
// generation's wait, with nobody to checkpoint. It returns the file for
// the program ("" for none).
func (c *liveCkpt) beforeLeave(ctx context.Context) string {
	if c == nil || !c.lastHolder || !c.w.synced || c.w.g == nil || c.taken == c.w.st.Applied {
		return ""
	}
	c.w.Log.Info("leaving with the only copy of the state: checkpointing it first", "step", c.w.st.Applied)
	return c.take(ctx, c.w.g, "every member leaves", true)
}

// take snapshots the data pipeline and the counters at this step boundary
// and returns the file the program is to write its state to; the upload
// runs once the file is there. With wait, one still in flight is waited
// for first (the last checkpoint before everybody stops) instead of
// skipping this one.
func (c *liveCkpt) take(ctx context.Context, g *coord.Generation, reason string, wait bool) string {
	w := c.w
	if w.st.Applied < 0 {
		return ""
	}
	if wait {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, _ = c.up.Wait(wctx)
		cancel()
	}
	epochs := []int{w.st.MetaEpoch}
	if w.st.Epoch != w.st.MetaEpoch {
		epochs = append(epochs, w.st.Epoch)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	pipe, err := w.dc.Pipe.Snapshot(pctx, epochs...)
	cancel()
	if err != nil {
		w.Log.Warn("checkpoint skipped", "step", w.st.Applied, "err", err)
		w.Rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint at step %d skipped: %v", w.st.Applied, err),
			map[string]any{"step": w.st.Applied, "skipped": true})
		return ""
	}
	data, _ := json.Marshal(core.DataShard{State: w.st, Pipeline: pipe})
	meta := checkpoint.Meta{Step: w.st.Applied, Epoch: w.st.Epoch, Generation: g.Number, WorldSize: len(g.Members),
		Labels: map[string]string{"loss": strconv.FormatFloat(w.st.Loss, 'g', 6, 64), "samples": strconv.FormatInt(w.st.Samples, 10),
			"kind": "live", "reason": reason}}
	snap, err := c.up.Begin(meta)
	if err != nil {
		return "" // ErrBusy, reported as skipped
	}
	path := filepath.Join(w.CkptDir, fmt.Sprintf("live-%d.pt", w.st.Applied))
	_ = os.Remove(path)
	_ = os.Remove(path + ".err")
	tr, _ := json.Marshal(liveTrainerShard{Format: liveCkptFormat, Shard: liveStateShard, Reason: reason})
	c.taken = meta.Step
	go c.collect(snap, path, data, tr, w.prog)
	w.Log.Info("checkpoint requested", "step", meta.Step, "reason", reason, "file", path)
	return path
}

// collect waits for the program's file and submits the checkpoint.
func (c *liveCkpt) collect(snap *checkpoint.Snapshot, path string, data, tr []byte, prog *core.Program) {
	b, err := awaitStateFile(path, prog.Done, c.fileWait)
	_ = os.Remove(path)
	if err != nil {
		c.up.Abort(snap)
		c.w.Log.Warn("checkpoint not written by the program", "file", path, "err", err)
		c.w.Rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint %s skipped: %v", filepath.Base(path), err),
			map[string]any{"skipped": true})
		return
	}
	snap.Add(liveStateShard, b)
	snap.Add(checkpoint.ShardData, data)
	snap.Add(checkpoint.ShardTrainer, tr)
	c.up.Submit(snap)
}

// awaitStateFile waits until the program renamed its state file into
// place (or wrote path.err), its program ended, or timeout passed.
func awaitStateFile(path string, done <-chan struct{}, timeout time.Duration) ([]byte, error) {
	deadline := time.After(timeout)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			return b, nil
		}
		if msg, err := os.ReadFile(path + ".err"); err == nil {
			_ = os.Remove(path + ".err")
			return nil, fmt.Errorf("the program could not write it: %s", msg)
		}
		select {
		case <-done:
			if b, err := os.ReadFile(path); err == nil {
				return b, nil
			}
			return nil, errors.New("the program ended before writing it")
		case <-deadline:
			return nil, fmt.Errorf("the program did not write it within %s", timeout)
		case <-t.C:
		}
	}
}

// wait waits (bounded) for a checkpoint in flight: before the worker
// leaves or the job ends, so the process does not end mid-upload.
func (c *liveCkpt) wait(ctx context.Context) {
	if c == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if res, err := c.up.Wait(wctx); err != nil || res.Err != nil {
		c.w.Log.Warn("last checkpoint not stored", "step", res.Step, "err", errors.Join(err, res.Err))
	}
}

// restore is rank 0's start of a generation that no member holds the
// state of: it loads the newest checkpoint that verifies (or starts from
// the program's initial state when there is none), puts the data pipeline
// back where that state left it, and returns the file the program loads
// ("" for its initial state). The worker's counters are the checkpoint's.
func (c *liveCkpt) restore(ctx context.Context, g *coord.Generation) (string, error) {
	w := c.w
	file := filepath.Join(w.CkptDir, liveRestoreFile)
	var d core.DataShard
	m, err := c.cat.Restore(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		b, err := core.ReadShard(ctx, cp, checkpoint.ShardData)
		if err != nil {
			return core.AsCorrupt(err)
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%w: data shard: %v", checkpoint.ErrCorrupt, err)
		}
		return copyShard(ctx, cp, liveStateShard, file)
	}, func(s checkpoint.Skip) {
		w.Rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint at step %d skipped at restore: %v", s.Step, s.Reason),
			map[string]any{"step": s.Step, "corrupt": true})
	})
	found := err == nil
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		d, file = core.DataShard{State: core.ProgressState{Applied: -1}}, ""
	case err != nil:
		return "", err
	}
	rec := datapipe.Reconciliation{Gen: g.Number, Applied: d.State.Applied, Epoch: d.State.Epoch,
		MetaEpoch: d.State.MetaEpoch, Members: g.Members, Meta: d.State.Meta, Debug: d.State.Debug}
	// Fence first: a late commit of the lost lineage (a step after the
	// checkpoint's, from a committer of an older generation) is refused
	// from now on, so it cannot land between the pipeline's restore and
	// the reconcile after it. What this reconcile does to the old records
	// the restore then replaces.
	if err := core.Retry(ctx, w.Log, "fence", func() error { _, err := w.dc.Pipe.Reconcile(ctx, rec); return err }); err != nil {
		return "", err
	}
	if err := core.Retry(ctx, w.Log, "restore data pipeline", func() error {
		return w.dc.Pipe.Restore(ctx, g.Number, w.epochs, d.Pipeline, d.State.Applied)
	}); err != nil {
		return "", fmt.Errorf("restore data pipeline: %w", err)
	}
	// The worker holds the training state only once its program is handed
	// the file (the reply to this join). Marked before a failed reconcile
	// (a generation superseded meanwhile), the worker reported the
	// checkpoint's step as held, was named the next generation's root with
	// nothing to restore, and its program went on from its initial model:
	// the checkpoint's model was silently lost.
	if _, err := w.dc.Reconcile(ctx, g, d.State); err != nil {
		return "", err
	}
	w.st, w.synced = d.State, true
	if found {
		c.taken = m.Step
	}
	switch {
	case found:
		msg := fmt.Sprintf("generation %d: no member holds the training state; restored the checkpoint of step %d (epoch %d)", g.Number, m.Step, m.Epoch)
		data := map[string]any{"step": m.Step, "epoch": m.Epoch, "generation": g.Number, "restored": true}
		if last := c.lastApplied(ctx); last > m.Step {
			msg += fmt.Sprintf("; the job had applied step %d: steps %d-%d are redone", last, m.Step+1, last)
			data["redone_from"], data["redone_to"] = m.Step+1, last
		}
		w.Rep.Event(jobs.EventCheckpoint, msg, data)
		w.Log.Info("checkpoint restored", "gen", g.Number, "step", m.Step, "epoch", m.Epoch)
	case g.Restore:
		w.Log.Warn("no checkpoint to restore: the job starts over", "gen", g.Number)
		w.Rep.Event(jobs.EventCheckpoint, fmt.Sprintf("generation %d: no member holds the training state and there is no checkpoint: the job starts over", g.Number),
			map[string]any{"generation": g.Number, "restored": false})
	}
	return file, nil
}

// lastApplied is the job's last applied step as its progress says (-1:
// unknown).
func (c *liveCkpt) lastApplied(ctx context.Context) int64 {
	if c.w.Deps.Jobs == nil {
		return -1
	}
	j, err := c.w.Deps.Jobs.Get(ctx, c.w.Cfg.Job)
	if err != nil {
		return -1
	}
	return j.Progress.Step
}

// copyShard writes a shard to file (through file.tmp and a rename).
func copyShard(ctx context.Context, cp *checkpoint.Checkpoint, name, file string) error {
	rc, err := cp.Open(ctx, name)
	if err != nil {
		return core.AsCorrupt(err)
	}
	defer rc.Close()
	tmp := file + ".tmp"
	if err := core.WriteFileFrom(tmp, 0o666, rc); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}
