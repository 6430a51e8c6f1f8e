package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// WorkerView lists a job's placed workers, finished ones included: the
// cluster (local.Cluster, nomadx.Cluster). An unknown job has none.
type WorkerView interface {
	Workers(ctx context.Context, jobID string) ([]jobs.Worker, error)
}

// Membership reads a job's current generation as its workers formed it.
type Membership interface {
	Generation(ctx context.Context, jobID string) (MemberGeneration, error)
}

// MemberGeneration is a job's current generation (Number 0: none formed
// yet) and the workers' own records (coord.RedisMembership reads it).
type MemberGeneration = jobs.MemberGeneration

// WorkerInfo is one worker of a job: where the cluster placed it and
// what its generation made of it.
type WorkerInfo struct {
	ID    string `json:"id" example:"a1b2c3d4-0000-4000-8000-000000000001"`
	Index int    `json:"index" example:"0"` // name index: workers[N]
	// Rank is the worker's rank in the current generation; -1 when it is
	// not a member of it (preparing, waiting, finished).
	Rank int `json:"rank" example:"0"`
	// Generation is the current generation's number when the worker is a
	// member of it, else 0.
	Generation int64            `json:"generation" example:"3"`
	Node       string           `json:"node" example:"node-1"`
	State      jobs.WorkerState `json:"state" example:"running"`
	// MemberState is the worker's own record: preparing, ready, active or
	// leaving; absent once it left or before it registered.
	MemberState string     `json:"member_state,omitempty" example:"active"`
	Started     *time.Time `json:"started,omitempty"`
	ExitCode    *int       `json:"exit_code,omitempty"`
	GPUs        []string   `json:"gpus,omitempty"`
}

// WorkerList is the body of GET /v1/jobs/{id}/workers.
type WorkerList struct {
	// Generation is the job's current generation (0: none formed yet).
	Generation int64        `json:"generation" example:"3"`
	Workers    []WorkerInfo `json:"workers"`
}

// listWorkers godoc
//
//	@Summary		A job's workers
//	@Description	Every worker the cluster placed for the job, finished ones included, by index: its node, the cluster's state, start time and exit code, and its rank in the current generation (from the workers' coordination records; -1 when not a member).
//	@Tags			jobs
//	@Security		BearerAuth
//	@Produce		json
//	@Param			id	path		string	true	"job ID"
//	@Success		200	{object}	WorkerList
//	@Failure		401	{object}	Problem
//	@Failure		404	{object}	Problem
//	@Failure		503	{object}	Problem	"no cluster attached"
//	@Router			/v1/jobs/{id}/workers [get]
func (s *Server) listWorkers(c echo.Context) error {
	j, err := s.ownBackedJob(c, s.cfg.Workers == nil, "no cluster is attached", "this server lists no workers")
	if err != nil {
		return err
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	list, err := s.jobWorkers(ctx, j.ID)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, list)
}

// jobWorkers joins the cluster's workers with the generation.
func (s *Server) jobWorkers(ctx context.Context, jobID string) (WorkerList, error) {
	ws, err := s.cfg.Workers.Workers(ctx, jobID)
	if err != nil {
		return WorkerList{}, fmt.Errorf("workers of %s: %w", jobID, err)
	}
	var g MemberGeneration
	if s.cfg.Membership != nil {
		if g, err = s.cfg.Membership.Generation(ctx, jobID); err != nil {
			return WorkerList{}, err
		}
	}
	return joinWorkers(ws, g), nil
}

// joinWorkers is the pure join of the cluster's view and the generation.
func joinWorkers(ws []jobs.Worker, g MemberGeneration) WorkerList {
	out := WorkerList{Generation: g.Number, Workers: make([]WorkerInfo, 0, len(ws))}
	for _, w := range ws {
		wi := WorkerInfo{ID: w.ID, Index: w.Index, Rank: slices.Index(g.Members, w.ID), Node: w.Node, State: w.State,
			MemberState: g.States[w.ID], ExitCode: w.ExitCode, GPUs: w.GPUs}
		if wi.Rank >= 0 {
			wi.Generation = g.Number
		}
		if !w.Started.IsZero() {
			t := w.Started
			wi.Started = &t
		}
		out.Workers = append(out.Workers, wi)
	}
	sort.SliceStable(out.Workers, func(a, b int) bool {
		if out.Workers[a].Index != out.Workers[b].Index {
			return out.Workers[a].Index < out.Workers[b].Index
		}
		return out.Workers[a].ID < out.Workers[b].ID
	})
	return out
}

// defaultWorker is the worker whose log GET .../logs serves without
// ?worker: rank 0 of the current generation (of a finished job: its last)
// when the cluster lists it, else the live worker with the lowest index,
// else the last started of the lowest index. ok is false when the job has
// no workers.
func defaultWorker(list WorkerList) (WorkerInfo, bool) {
	if len(list.Workers) == 0 {
		return WorkerInfo{}, false
	}
	for _, w := range list.Workers {
		if w.Rank == 0 {
			return w, true
		}
	}
	for _, w := range list.Workers {
		if w.State.Live() {
			return w, true
		}
	}
	best := list.Workers[0]
	for _, w := range list.Workers[1:] {
		if w.Index == best.Index && w.Started != nil && (best.Started == nil || w.Started.After(*best.Started)) {
			best = w
		}
	}
	return best, true
}
