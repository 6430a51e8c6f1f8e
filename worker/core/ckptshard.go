package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// CheckpointJob is the job id under which a job's checkpoints live in the
// store: the API lists them with checkpoint.List(ctx, store,
// CheckpointJob(id)) and streams a model with checkpoint.OpenModel.
func CheckpointJob(job string) string { return job }

// DataShard is the checkpoint's data-pipeline shard: the training counters
// and, as of the same step boundary, the queues and partition records of
// the epochs in use.
type DataShard struct {
	State    ProgressState         `json:"state"`
	Pipeline []datapipe.EpochState `json:"pipeline"`
}

// CatalogConfig is the retention of a job's checkpoints: the newest
// spec.checkpoint.keep, whatever wrote them (every_steps, an epoch end, a
// stop). Keeping the newest of every epoch as well (KeepPerEpoch) let
// epoch-end checkpoints escape keep: 8 kept with keep 3.
func CatalogConfig(job string, spec jobs.Spec, log *slog.Logger) checkpoint.Config {
	return checkpoint.Config{Job: CheckpointJob(job), Keep: spec.Checkpoint.Keep, Log: log}
}

// ReportCheckpointEvent logs an uploader's event and makes the job's
// record and events say it; the built-in trainer and live mode share it.
func ReportCheckpointEvent(log *slog.Logger, rep *Reporter, cat *checkpoint.Catalog, e checkpoint.Event) {
	switch e.Kind {
	case checkpoint.EventCommitted:
		log.Info("checkpoint committed", "step", e.Step, "bytes", e.Manifest.Size(), "took", e.Took.Round(time.Millisecond))
		rep.Checkpoint(jobs.CheckpointRef{Step: e.Step, Epoch: e.Manifest.Epoch, URL: cat.Store().String(),
			SizeBytes: e.Manifest.Size(), CreatedAt: e.Manifest.CreatedAt})
	case checkpoint.EventSkipped:
		rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint at step %d skipped: the previous one is still uploading", e.Step),
			map[string]any{"step": e.Step, "skipped": true})
	case checkpoint.EventRetry:
		log.Warn("checkpoint upload failed, retrying", "step", e.Step, "attempt", e.Attempt, "err", e.Err)
		rep.Event(jobs.EventCheckpoint, fmt.Sprintf("checkpoint at step %d: attempt %d failed, retrying: %v", e.Step, e.Attempt, e.Err),
			map[string]any{"step": e.Step, "attempt": e.Attempt})
	case checkpoint.EventFailed:
		log.Warn("checkpoint given up", "step", e.Step, "err", e.Err)
		rep.Event(jobs.EventError, fmt.Sprintf("checkpoint at step %d failed: %v; training goes on", e.Step, e.Err),
			map[string]any{"step": e.Step})
	case checkpoint.EventPruneErr:
		log.Warn("checkpoint retention failed", "err", e.Err)
	}
}

// WriteFileFrom writes what r holds to the file at path (created with perm
// before the umask, or truncated), and returns the first error of the copy
// and the close: a close that fails loses written data too.
func WriteFileFrom(path string, perm os.FileMode, r io.Reader) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadShard reads a checkpoint's shard whole.
func ReadShard(ctx context.Context, cp *checkpoint.Checkpoint, name string) ([]byte, error) {
	rc, err := cp.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// AsCorrupt makes a missing shard a reason to skip the checkpoint.
func AsCorrupt(err error) error {
	if errors.Is(err, checkpoint.ErrNotFound) {
		return fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
	}
	return err
}
