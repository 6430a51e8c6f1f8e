package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/labstack/echo/v4"
)

// SweepList is one page of sweeps, newest first.
type SweepList struct {
	Sweeps []sweep.Sweep `json:"sweeps"`
	// Next is the cursor of the next page; absent on the last page.
	Next string `json:"next,omitempty" example:"42"`
}

// SweepEventPage is a page of a sweep's event log, oldest first.
type SweepEventPage struct {
	Events []sweep.Event `json:"events"`
	Next   string        `json:"next,omitempty" example:"1700000000000-0"`
}

// sweepRoutes registers the /v1/sweeps routes.
func (s *Server) sweepRoutes(v1 *echo.Group, mw []echo.MiddlewareFunc) {
	v1.POST("/sweeps", s.createSweep, mw...)
	v1.GET("/sweeps", s.listSweeps, mw...)
	v1.GET("/sweeps/:id", s.getSweep, mw...)
	v1.DELETE("/sweeps/:id", s.cancelSweep, mw...)
	v1.GET("/sweeps/:id/events", s.sweepEvents, mw...)
}

var errNoSweeps = newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "sweeps are not served here", "this server has no sweep store")

func noSweep(id string) error {
	return newProblem(http.StatusNotFound, ProblemNotFound, "no such sweep", "no sweep "+id+" of this tenant")
}

// createSweep godoc
//
//	@Summary		Submit a hyperparameter sweep
//	@Description	Validates the spec (unknown fields are refused; every parameter is applied to the template and the trial spec validated as a job's, so a path to nowhere names the parameter), draws every trial's parameters from the seed and stores the sweep as running. The planner's sweep controller starts trials (ordinary jobs labelled edl.sweep and edl.trial) up to max_concurrent, cuts them by ASHA at rungs grace x reduction_factor^k steps, and gives a cut trial's workers to the best surviving trials up to their workers.max. With an Idempotency-Key the same key and body return the same sweep (201 the first time, 200 after); the same key with another body is 422.
//	@Tags			sweeps
//	@Security		BearerAuth
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			Idempotency-Key	header		string		false	"makes retries safe (at most 255 characters)"
//	@Param			spec			body		sweep.Spec	true	"the sweep spec"
//	@Success		201				{object}	sweep.Sweep	"created; Location names it"
//	@Success		200				{object}	sweep.Sweep	"an earlier submit with the same Idempotency-Key"
//	@Failure		400				{object}	Problem		"malformed JSON"
//	@Failure		401				{object}	Problem
//	@Failure		408				{object}	Problem	"the body was not sent within the server's body read timeout"
//	@Failure		413				{object}	Problem
//	@Failure		415				{object}	Problem
//	@Failure		422				{object}	Problem	"invalid fields, a trial the tenant may not run, or Idempotency-Key reused with another body"
//	@Failure		429				{object}	Problem
//	@Failure		503				{object}	Problem
//	@Router			/v1/sweeps [post]
func (s *Server) createSweep(c echo.Context) error {
	if s.cfg.Sweeps == nil {
		return errNoSweeps
	}
	body, key, err := s.readCreate(c)
	if err != nil {
		return err
	}
	var spec sweep.Spec
	if err := jobs.DecodeStrict(body, &spec); err != nil {
		return err
	}
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return err
	}
	// Every trial must be a job this tenant may submit, under the exec policy.
	for i, params := range sweep.NewTrials(spec) {
		ts, err := sweep.TrialSpec(spec, "s-check", i, params.Params)
		if err != nil {
			return jobs.Invalid(fmt.Sprintf("trials[%d]", i), err.Error())
		}
		if ts.Trainer.Kind == jobs.TrainerExec && s.cfg.ExecPolicy != nil {
			if err := s.cfg.ExecPolicy(ts); err != nil {
				return templateFields(err)
			}
		}
		if err := tenantOf(c).Admit(ts, ""); err != nil {
			return templateFields(err)
		}
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	sw, created, err := s.cfg.Sweeps.Create(ctx, tenantOf(c).Name, spec, key)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/sweeps/"+sw.ID)
	if created {
		return writeJSON(c, http.StatusCreated, sw)
	}
	return writeJSON(c, http.StatusOK, sw)
}

// templateFields names a trial spec's fields as the template's.
func templateFields(err error) error {
	var ve *jobs.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &jobs.ValidationError{}
	for _, f := range ve.Fields {
		out.Fields = append(out.Fields, jobs.FieldError{Field: "template." + f.Field, Reason: f.Reason})
	}
	return out
}

// ownSweep loads a sweep of the caller's; another tenant's is 404.
func (s *Server) ownSweep(c echo.Context) (sweep.Sweep, error) {
	if s.cfg.Sweeps == nil {
		return sweep.Sweep{}, errNoSweeps
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	sw, err := s.cfg.Sweeps.Get(ctx, c.Param("id"))
	if errors.Is(err, jobs.ErrNotFound) || (err == nil && sw.Tenant != tenantOf(c).Name) {
		return sweep.Sweep{}, noSweep(c.Param("id"))
	}
	return sw, err
}

// getSweep godoc
//
//	@Summary		A sweep: its trials and the best one
//	@Description	Every trial with its parameters, state, job, rung, rung results, newest metric and pinned size; best is the trial at the highest rung with the best metric there.
//	@Tags			sweeps
//	@Security		BearerAuth
//	@Produce		json
//	@Param			id	path		string	true	"sweep ID"
//	@Success		200	{object}	sweep.Sweep
//	@Failure		404	{object}	Problem
//	@Router			/v1/sweeps/{id} [get]
func (s *Server) getSweep(c echo.Context) error {
	sw, err := s.ownSweep(c)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, sw)
}

// listSweeps godoc
//
//	@Summary		List the caller's sweeps
//	@Tags			sweeps
//	@Security		BearerAuth
//	@Produce		json
//	@Param			limit	query		int		false	"page size, 1-500 (default 50)"
//	@Param			next	query		string	false	"the next value of the previous page (a bad one is 400)"
//	@Param			cursor	query		string	false	"the same as next (either name)"
//	@Success		200		{object}	SweepList
//	@Failure		400		{object}	Problem
//	@Router			/v1/sweeps [get]
func (s *Server) listSweeps(c echo.Context) error {
	if s.cfg.Sweeps == nil {
		return errNoSweeps
	}
	limit, err := queryLimit(c, 50, 500)
	if err != nil {
		return err
	}
	cursor, cursorParam, err := queryCursor(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	page, next, err := s.cfg.Sweeps.List(ctx, tenantOf(c).Name, limit, cursor)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		return badQuery(cursorParam, "not a cursor of this list")
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, SweepList{Sweeps: page, Next: next})
}

// cancelSweep godoc
//
//	@Summary		Cancel a sweep and every trial
//	@Description	The sweep goes cancelling at once; the controller cancels every trial's job and the sweep is cancelled when they are gone. Cancelling a sweep already being cancelled is harmless (202); a finished sweep is 409.
//	@Tags			sweeps
//	@Security		BearerAuth
//	@Produce		json
//	@Param			id	path		string	true	"sweep ID"
//	@Success		202	{object}	sweep.Sweep
//	@Failure		404	{object}	Problem
//	@Failure		409	{object}	Problem	"the sweep has finished"
//	@Router			/v1/sweeps/{id} [delete]
func (s *Server) cancelSweep(c echo.Context) error {
	if _, err := s.ownSweep(c); err != nil {
		return err
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	sw, err := s.cfg.Sweeps.Update(ctx, c.Param("id"), func(sw *sweep.Sweep) ([]sweep.Event, error) {
		switch {
		case sw.State == sweep.Cancelling:
			return nil, errAlreadyCancelling
		case sw.State.Terminal():
			return nil, newProblem(http.StatusConflict, ProblemJobFinished, "the sweep has finished", "the sweep is "+string(sw.State))
		}
		from := sw.State
		sw.State, sw.Reason = sweep.Cancelling, "cancelled by the tenant"
		return []sweep.Event{{Type: sweep.EventState, Message: string(from) + " -> cancelling",
			Data: map[string]any{"from": string(from), "to": string(sweep.Cancelling), "reason": sw.Reason}}}, nil
	})
	if errors.Is(err, errAlreadyCancelling) {
		sw, err = s.ownSweep(c)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, sw)
}

// sweepEvents godoc
//
//	@Summary		A sweep's event log
//	@Description	Trials started, promoted, cut, grown and ended, best trial changes and state changes. As JSON pages, or, with follow=true (or Accept: text/event-stream), as Server-Sent Events (each event's SSE id is its ID; Last-Event-ID resumes), ending after the sweep's final state change.
//	@Tags			sweeps
//	@Security		BearerAuth
//	@Produce		json
//	@Produce		text/event-stream
//	@Param			id				path		string	true	"sweep ID"
//	@Param			after			query		string	false	"return events after this ID"
//	@Param			limit			query		int		false	"page size, 1-500 (default 100)"
//	@Param			follow			query		bool	false	"stream as Server-Sent Events"
//	@Param			Last-Event-ID	header		string	false	"resume a stream after this ID"
//	@Success		200				{object}	SweepEventPage
//	@Failure		400				{object}	Problem
//	@Failure		404				{object}	Problem
//	@Failure		429				{object}	Problem	"the tenant holds its most event streams open"
//	@Router			/v1/sweeps/{id}/events [get]
func (s *Server) sweepEvents(c echo.Context) error {
	sw, err := s.ownSweep(c)
	if err != nil {
		return err
	}
	return serveLog(s, c, s.sweepLog(sw), func(evs []sweep.Event, next string) any { return SweepEventPage{Events: evs, Next: next} })
}

// sweepLog is the sweep's event log: a stream of it ends after the
// sweep's final state change, woken by the server's one sweep Follower,
// so that an idle stream holds no Redis connection (as a job's).
func (s *Server) sweepLog(sw sweep.Sweep) eventFeed[sweep.Event] {
	return eventFeed[sweep.Event]{
		what:   "sweep " + sw.ID,
		follow: func() (<-chan struct{}, func()) { return s.sweepFollow.Follow(sw.ID) },
		page: func(ctx context.Context, after string, n int) ([]sweep.Event, error) {
			return s.cfg.Sweeps.Events(ctx, sw.ID, after, n)
		},
		head: func(ev sweep.Event) (string, string) { return ev.ID, string(ev.Type) },
		ends: func(ev sweep.Event) bool {
			to, _ := ev.Data["to"].(string)
			return ev.Type == sweep.EventState && sweep.State(to).Terminal()
		},
		ended: func(ctx context.Context) (bool, error) {
			cur, err := s.cfg.Sweeps.Get(ctx, sw.ID)
			return err == nil && cur.State.Terminal(), err
		},
	}
}
