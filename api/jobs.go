package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// JobList is one page of jobs, newest first.
type JobList struct {
	Jobs []jobs.Job `json:"jobs"`
	// Next is the cursor of the next page; absent on the last page.
	Next string `json:"next,omitempty" example:"c1.MTIz"`
}

// rawJobList writes a JobList from jobs as the store holds them (compact
// JSON from json.Marshal), sparing a decode and re-encode of each.
func rawJobList(page []json.RawMessage, next string) []byte {
	n := 32 + len(next)
	for _, j := range page {
		n += len(j) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"jobs":[`...)
	for i, j := range page {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, j...)
	}
	b = append(b, ']')
	if next != "" {
		b = append(b, `,"next":`...)
		b = strconv.AppendQuote(b, next) // cursors are base64url: plain ASCII
	}
	return append(b, "}\n"...)
}

// ScaleRequest pins a job's size.
type ScaleRequest struct {
	// Workers is the size to pin, within [spec.workers.min, spec.workers.max];
	// 0 hands the choice back to the planner.
	Workers *int `json:"workers" example:"2"`
}

// JobPatch documents PATCH /v1/jobs/{id}: a JSON merge patch (RFC 7396) of
// the job resource in which only spec.workers and spec.priority may change.
type JobPatch struct {
	Spec SpecPatch `json:"spec"`
}

// SpecPatch is the patchable part of a spec.
type SpecPatch struct {
	Workers  *jobs.WorkerRange `json:"workers,omitempty"`
	Priority jobs.Priority     `json:"priority,omitempty"`
}

const (
	mimeJSON       = echo.MIMEApplicationJSON
	mimeMergePatch = "application/merge-patch+json"
)

// createJob godoc
//
//	@Summary		Submit a job
//	@Description	Validates the spec (unknown fields are refused) and stores the job as pending. With an Idempotency-Key the same key and body return the same job (201 the first time, 200 after); the same key with another body is 422. A 201 is durable once Redis has acknowledged it.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			Idempotency-Key	header		string		false	"makes retries safe (at most 255 characters)"
//	@Param			dry_run			query		bool		false	"answer whether the job would be admitted (DryRun) without creating it"
//	@Param			spec			body		jobs.Spec	true	"the job spec"
//	@Success		201				{object}	jobs.Job	"created; Location names it"
//	@Success		200				{object}	jobs.Job	"an earlier submit with the same Idempotency-Key (with dry_run=true: a DryRun)"
//	@Failure		400				{object}	Problem		"malformed JSON"
//	@Failure		401				{object}	Problem
//	@Failure		413				{object}	Problem
//	@Failure		415				{object}	Problem
//	@Failure		408				{object}	Problem	"the body was not sent within the server's body read timeout"
//	@Failure		422				{object}	Problem	"a strict deadline job that cannot be guaranteed (type urn:edl:problem:deadline-infeasible, with earliest_feasible); invalid fields (duplicate keys, bounds on the model's parameters and batch x width, the tenant's max_workers and max_parameters included), or Idempotency-Key reused with another body"
//	@Failure		429				{object}	Problem
//	@Failure		503				{object}	Problem	"the store is unavailable; Retry-After"
//	@Router			/v1/jobs [post]
func (s *Server) createJob(c echo.Context) error {
	body, key, err := s.readCreate(c)
	if err != nil {
		return err
	}
	spec, err := s.decodeSpec(body) // validation, then the exec policy
	if err != nil {
		return err
	}
	if err := tenantOf(c).Admit(spec, ""); err != nil {
		return err
	}
	if spec.HasDeadline() {
		// Judged and created one at a time: each deadline job is judged
		// with the ones admitted before it among the live jobs.
		ctx, cancel := s.storeCtx(c)
		unlock, err := s.store.LockAdmission(ctx)
		cancel()
		if err != nil {
			return err
		}
		defer unlock()
	}
	if done, err := s.deadlineGate(c, spec, key); done { // deadline.go: admission, dry_run
		return err
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	job, raw, created, err := s.store.CreateJSON(ctx, tenantOf(c).Name, spec, key)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/jobs/"+job.ID)
	if created {
		// The JSON just stored, as GET returns it: no second encoding.
		return c.JSONBlob(http.StatusCreated, append(raw, '\n'))
	}
	return writeJSON(c, http.StatusOK, job)
}

// readCreate reads a create request (a job's, a sweep's): its JSON body
// and its Idempotency-Key header ("" = none), at most 255 printable
// characters.
func (s *Server) readCreate(c echo.Context) (body []byte, key string, err error) {
	body, err = s.readBody(c, mimeJSON)
	if err != nil {
		return nil, "", err
	}
	key = c.Request().Header.Get("Idempotency-Key")
	if len(key) > 255 || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, "", jobs.Invalid("Idempotency-Key", "at most 255 printable characters")
	}
	return body, key, nil
}

// listJobs godoc
//
//	@Summary		List the caller's jobs
//	@Description	Newest first. The next cursor stays valid while jobs are added; a filtered page may hold fewer than limit jobs and still have a next cursor.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Produce		json
//	@Param			status	query		[]string	false	"keep jobs in these states (comma-separated or repeated)"	collectionFormat(csv)
//	@Param			label	query		[]string	false	"keep jobs with this label, as key=value (repeat for several)"	collectionFormat(multi)
//	@Param			limit	query		int			false	"page size, 1-500 (default 50)"
//	@Param			next	query		string		false	"the next value of the previous page (a bad one is 400)"
//	@Param			cursor	query		string		false	"the same as next (either name)"
//	@Success		200		{object}	JobList
//	@Failure		400		{object}	Problem
//	@Failure		401		{object}	Problem
//	@Failure		429		{object}	Problem
//	@Router			/v1/jobs [get]
func (s *Server) listJobs(c echo.Context) error {
	cursor, cursorParam, err := queryCursor(c)
	if err != nil {
		return err
	}
	q := jobs.ListQuery{Tenant: tenantOf(c).Name, Cursor: cursor}
	if q.States, err = queryStates(c); err != nil {
		return err
	}
	if q.Labels, err = queryLabels(c); err != nil {
		return err
	}
	limit, err := queryLimit(c, q.Limit, jobs.MaxListLimit)
	if err != nil {
		return err
	}
	q.Limit = limit
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	page, next, err := s.store.ListJSON(ctx, q)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		field := ve.Fields[0].Field
		if field == "cursor" {
			field = cursorParam
		}
		return badQuery(field, ve.Fields[0].Reason)
	}
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, rawJobList(page, next))
}

// queryStates reads status (comma-separated or repeated), each state once
// (every scanned job was compared with each, so status=running repeated
// 70,000 times cost as many comparisons a job); an unknown one is 400.
func queryStates(c echo.Context) ([]jobs.State, error) {
	var out []jobs.State
	for _, v := range c.QueryParams()["status"] {
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			switch {
			case st == "" || slices.Contains(out, jobs.State(st)):
			case !jobs.State(st).Valid():
				return nil, badQuery("status", fmt.Sprintf("unknown state %.40q", st))
			default:
				out = append(out, jobs.State(st))
			}
		}
	}
	return out, nil
}

// queryLabels reads label=k=v filters: at most jobs.MaxLabels keys, each
// within a label's bounds, since a job holds no more nor longer labels
// (a filtered list compares every job it scans with each filter).
func queryLabels(c echo.Context) (map[string]string, error) {
	var out map[string]string
	for _, l := range c.QueryParams()["label"] {
		k, v, ok := strings.Cut(l, "=")
		switch {
		case !ok || k == "":
			return nil, badQuery("label", "must be key=value")
		case len(k) > jobs.MaxLabelKeyLen || len(v) > jobs.MaxLabelValueLen:
			return nil, badQuery("label", fmt.Sprintf("%.40q...: a label's key is at most %d bytes and its value %d", l, jobs.MaxLabelKeyLen, jobs.MaxLabelValueLen))
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
		if len(out) > jobs.MaxLabels {
			return nil, badQuery("label", fmt.Sprintf("at most %d label filters (a job has at most %d labels)", jobs.MaxLabels, jobs.MaxLabels))
		}
	}
	return out, nil
}

func badQuery(field, reason string) error {
	p := newProblem(http.StatusBadRequest, ProblemValidation, "invalid query parameters", "")
	p.p.Errors = []jobs.FieldError{{Field: field, Reason: reason}}
	return p
}

// ownJob loads a job of the caller's; another tenant's job is ErrNotFound.
func (s *Server) ownJob(c echo.Context) (jobs.Job, error) {
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	j, err := s.store.Get(ctx, c.Param("id"))
	if err != nil {
		return jobs.Job{}, err
	}
	if j.Tenant != tenantOf(c).Name {
		return jobs.Job{}, jobs.ErrNotFound
	}
	return j, nil
}

// ownBackedJob is ownJob for a route served by an optional backend (the
// checkpoint store, the cluster): after the job is found, missing (the
// server was started without the backend) is a 503 with title and detail.
func (s *Server) ownBackedJob(c echo.Context, missing bool, title, detail string) (jobs.Job, error) {
	j, err := s.ownJob(c)
	if err != nil {
		return jobs.Job{}, err
	}
	if missing {
		return jobs.Job{}, newProblem(http.StatusServiceUnavailable, ProblemUnavailable, title, detail)
	}
	return j, nil
}

// getJob godoc
//
//	@Summary	Get a job
//	@Tags		jobs
//	@Security	BearerAuth
//	@Produce	json
//	@Param		id	path		string	true	"job ID"
//	@Success	200	{object}	jobs.Job
//	@Failure	401	{object}	Problem
//	@Failure	404	{object}	Problem	"no such job (or another tenant's)"
//	@Router		/v1/jobs/{id} [get]
func (s *Server) getJob(c echo.Context) error {
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	tenant, raw, err := s.store.GetJSON(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if tenant != tenantOf(c).Name {
		return jobs.ErrNotFound
	}
	return c.JSONBlob(http.StatusOK, raw)
}

// update applies fn to the caller's job, which must still be live.
func (s *Server) update(c echo.Context, fn func(*jobs.Job) ([]jobs.Event, error)) (jobs.Job, error) {
	tenant := tenantOf(c).Name
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	j, _, err := s.store.UpdateWith(ctx, c.Param("id"), func(j *jobs.Job) ([]jobs.Event, error) {
		if j.Tenant != tenant {
			return nil, jobs.ErrNotFound
		}
		if !j.State.Live() {
			return nil, jobFinished(j.State)
		}
		return fn(j)
	})
	return j, err
}

func jobFinished(st jobs.State) error {
	return newProblem(http.StatusConflict, ProblemJobFinished, "the job is no longer live",
		fmt.Sprintf("the job is %s", st))
}

// patchJob godoc
//
//	@Summary		Change a live job's worker range or priority
//	@Description	A JSON merge patch (RFC 7396) of the job: only spec.workers.min, spec.workers.max and spec.priority may change; any other member is refused by name before anything is merged (unless it repeats the current value exactly), and so are duplicate keys. A pinned size outside the new range is unpinned.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Accept			application/merge-patch+json
//	@Accept			json
//	@Produce		json
//	@Param			id		path		string		true	"job ID"
//	@Param			patch	body		JobPatch	true	"merge patch"
//	@Success		200		{object}	jobs.Job
//	@Failure		400		{object}	Problem	"malformed JSON"
//	@Failure		404		{object}	Problem
//	@Failure		408		{object}	Problem	"the body was not sent within the server's body read timeout"
//	@Failure		409		{object}	Problem	"the job is finished or being cancelled"
//	@Failure		413		{object}	Problem
//	@Failure		415		{object}	Problem
//	@Failure		422		{object}	Problem
//	@Router			/v1/jobs/{id} [patch]
func (s *Server) patchJob(c echo.Context) error {
	body, err := s.readBody(c, mimeMergePatch, mimeJSON)
	if err != nil {
		return err
	}
	j, err := s.update(c, func(j *jobs.Job) ([]jobs.Event, error) {
		next, err := jobs.ApplyMergePatch(*j, body)
		if err != nil {
			return nil, err
		}
		if err := tenantOf(c).Admit(next, "spec."); err != nil {
			return nil, err
		}
		old := j.Spec
		j.Spec = next
		if old.Workers == next.Workers && old.Priority == next.Priority {
			return nil, nil
		}
		msg := fmt.Sprintf("spec changed: workers %d..%d -> %d..%d, priority %s -> %s",
			old.Workers.Min, old.Workers.Max, next.Workers.Min, next.Workers.Max, old.Priority, next.Priority)
		if p := j.Workers.Pinned; p != 0 && (p < next.Workers.Min || p > next.Workers.Max) {
			j.Workers.Pinned = 0
			msg += fmt.Sprintf("; pin %d dropped", p)
		}
		return []jobs.Event{{Type: jobs.EventScale, Message: msg, Data: map[string]any{
			"by": "tenant", "min": next.Workers.Min, "max": next.Workers.Max, "priority": string(next.Priority)}}}, nil
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, j)
}

// scaleJob godoc
//
//	@Summary		Pin a job's size
//	@Description	Asks for a fixed number of workers within [min, max]; the planner applies it when it can. 0 unpins. A deadline job cannot be pinned (422): the planner picks its workers.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Accept			json
//	@Produce		json
//	@Param			id		path		string			true	"job ID"
//	@Param			request	body		ScaleRequest	true	"the size"
//	@Success		202		{object}	jobs.Job
//	@Failure		400		{object}	Problem	"malformed JSON"
//	@Failure		404		{object}	Problem
//	@Failure		408		{object}	Problem	"the body was not sent within the server's body read timeout"
//	@Failure		409		{object}	Problem
//	@Failure		413		{object}	Problem
//	@Failure		415		{object}	Problem
//	@Failure		422		{object}	Problem
//	@Router			/v1/jobs/{id}/scale [post]
func (s *Server) scaleJob(c echo.Context) error {
	body, err := s.readBody(c, mimeJSON)
	if err != nil {
		return err
	}
	var req ScaleRequest
	if err := jobs.DecodeStrict(body, &req); err != nil {
		return err
	}
	if req.Workers == nil {
		return jobs.Invalid("workers", "required")
	}
	j, err := s.update(c, func(j *jobs.Job) ([]jobs.Event, error) {
		if err := j.Pin(*req.Workers); err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("pinned to %d workers by the tenant", *req.Workers)
		if *req.Workers == 0 {
			msg = "unpinned by the tenant"
		}
		return []jobs.Event{{Type: jobs.EventScale, Message: msg, Data: map[string]any{"by": "tenant", "pinned": *req.Workers}}}, nil
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, j)
}

// cancelJob godoc
//
//	@Summary		Cancel a job
//	@Description	The job goes cancelling at once and cancelled when its workers are gone. Cancelling a job already being cancelled is harmless (202); a finished job is 409.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Produce		json
//	@Param			id	path		string	true	"job ID"
//	@Success		202	{object}	jobs.Job
//	@Failure		404	{object}	Problem
//	@Failure		409	{object}	Problem	"the job has finished"
//	@Router			/v1/jobs/{id} [delete]
func (s *Server) cancelJob(c echo.Context) error {
	tenant := tenantOf(c).Name
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	j, err := s.store.Update(ctx, c.Param("id"), func(j *jobs.Job) error {
		switch {
		case j.Tenant != tenant:
			return jobs.ErrNotFound
		case j.State == jobs.Cancelling:
			return errAlreadyCancelling
		case j.State.Terminal():
			return jobFinished(j.State)
		}
		j.State, j.Reason = jobs.Cancelling, "cancelled by the tenant"
		return nil
	})
	if errors.Is(err, errAlreadyCancelling) {
		j, err = s.ownJob(c)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, j)
}

var errAlreadyCancelling = errors.New("already cancelling")

// queryCursor reads a list's page cursor: the previous page's next value,
// given back as next (its name) or cursor. param is the name it came as.
func queryCursor(c echo.Context) (cursor, param string, err error) {
	params := c.QueryParams()
	cursor, param = c.QueryParam("cursor"), "cursor"
	if n, ok := params["next"]; ok {
		if cursor != "" && cursor != n[0] {
			return "", "", badQuery("next", "next and cursor differ: give one")
		}
		cursor, param = n[0], "next"
		if cursor == "" {
			return "", "", badQuery("next", "empty: give a page's next value, or leave next out for the first page")
		}
	}
	return cursor, param, nil
}
