package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// CheckpointView is what the checkpoint routes need from object storage:
// a job's committed checkpoints and a stream of one's model. cmd/edl
// adapts the checkpoint package to it; nil means no store is configured.
// Both return jobs.ErrNotFound when there is no such checkpoint.
type CheckpointView interface {
	ListCheckpoints(ctx context.Context, jobID string) ([]Checkpoint, error)
	OpenModel(ctx context.Context, jobID string, step int64) (io.ReadCloser, CheckpointShard, error)
}

// Checkpoint is one committed checkpoint (its manifest).
type Checkpoint struct {
	Step       int64             `json:"step" example:"1200"`
	Epoch      int               `json:"epoch" example:"3"`
	Generation int64             `json:"generation" example:"4"`
	WorldSize  int               `json:"world_size" example:"2"`
	SizeBytes  int64             `json:"size_bytes" example:"212555"`
	CreatedAt  time.Time         `json:"created_at"`
	Shards     []CheckpointShard `json:"shards"`
}

// CheckpointShard is one part of a checkpoint with its integrity data.
type CheckpointShard struct {
	Name   string `json:"name" example:"params"`
	Size   int64  `json:"size" example:"104530"`
	SHA256 string `json:"sha256" example:"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"`
}

// CheckpointList is the body of GET /v1/jobs/{id}/checkpoints.
type CheckpointList struct {
	// Checkpoints, newest first; the newest of a finished job is its result.
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// checkpointJob is the caller's job of a checkpoint route (ownBackedJob).
func (s *Server) checkpointJob(c echo.Context) (jobs.Job, error) {
	return s.ownBackedJob(c, s.cfg.Checkpoints == nil, "no checkpoint store is configured", "start edl with --store")
}

// listCheckpoints godoc
//
//	@Summary		A job's checkpoints
//	@Description	The committed checkpoints of the job (a checkpoint exists only once its manifest is written, after all its shards), newest first, with each shard's size and SHA-256.
//	@Tags			checkpoints
//	@Security		BearerAuth
//	@Produce		json
//	@Param			id	path		string	true	"job ID"
//	@Success		200	{object}	CheckpointList
//	@Failure		401	{object}	Problem
//	@Failure		404	{object}	Problem
//	@Failure		503	{object}	Problem	"no checkpoint store configured"
//	@Router			/v1/jobs/{id}/checkpoints [get]
func (s *Server) listCheckpoints(c echo.Context) error {
	j, err := s.checkpointJob(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	list, err := s.cfg.Checkpoints.ListCheckpoints(ctx, j.ID)
	if err != nil {
		return fmt.Errorf("list checkpoints of %s: %w", j.ID, err)
	}
	if list == nil {
		list = []Checkpoint{}
	}
	return writeJSON(c, http.StatusOK, CheckpointList{Checkpoints: list})
}

// checkpointModel godoc
//
//	@Summary		Download a checkpoint's model
//	@Description	Streams the trained parameters of the checkpoint at step in edl's trainer state format, all little-endian: "EDLM"; uint32 format version (1); uint32 flags (bit 0: SGD velocity follows the parameters; unset here); uint32 L, the number of layer widths; L uint32 widths (inputs, hidden..., classes); uint64 P, the parameter count; P float32 parameters, per layer its weights (inputs x outputs, row-major) then its biases; uint32 CRC-32C (Castagnoli) of every byte before it. X-Checkpoint-SHA256 is the SHA-256 of the body as the checkpoint's manifest records it. The newest checkpoint of a succeeded job is its result.
//	@Tags			checkpoints
//	@Security		BearerAuth
//	@Produce		application/octet-stream
//	@Param			id		path		string	true	"job ID"
//	@Param			step	path		int		true	"checkpoint step"
//	@Success		200		{file}		binary
//	@Header			200		{string}	X-Checkpoint-SHA256	"SHA-256 of the body (hex)"
//	@Failure		400		{object}	Problem
//	@Failure		401		{object}	Problem
//	@Failure		404		{object}	Problem	"no such job, or no checkpoint with a model at that step"
//	@Failure		503		{object}	Problem	"no checkpoint store configured"
//	@Router			/v1/jobs/{id}/checkpoints/{step}/model [get]
func (s *Server) checkpointModel(c echo.Context) error {
	step, perr := strconv.ParseInt(c.Param("step"), 10, 64)
	if perr != nil || step < 0 {
		return badQuery("step", "must be a checkpoint's step, a non-negative integer")
	}
	j, err := s.checkpointJob(c)
	if err != nil {
		return err
	}
	rc, shard, err := s.cfg.Checkpoints.OpenModel(c.Request().Context(), j.ID, step)
	if errors.Is(err, jobs.ErrNotFound) {
		return newProblem(http.StatusNotFound, ProblemNotFound, "no such checkpoint",
			fmt.Sprintf("job %s has no committed checkpoint with a model at step %d (GET .../checkpoints lists them)", j.ID, step))
	}
	if err != nil {
		return fmt.Errorf("open model of %s at step %d: %w", j.ID, step, err)
	}
	defer rc.Close()
	s.streamWrites(c) // a model is up to hundreds of MiB: each write gets a deadline
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/octet-stream")
	h.Set(echo.HeaderContentLength, strconv.FormatInt(shard.Size, 10))
	h.Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", fmt.Sprintf("%s-step%d.edlm", j.ID, step)))
	h.Set("X-Checkpoint-SHA256", shard.SHA256)
	c.Response().WriteHeader(http.StatusOK)
	_, err = io.Copy(c.Response(), rc)
	return err // headers are sent: a failure here can only cut the stream
}
