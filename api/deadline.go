package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
	"github.com/labstack/echo/v4"
)

// DryRun is what POST /v1/jobs?dry_run=true answers: whether the job would
// be admitted now, and its plan. Nothing is created.
type DryRun struct {
	Admitted bool `json:"admitted"`
	// AtRisk: a best-effort deadline job admitted without a plan that
	// meets its deadline.
	AtRisk bool   `json:"at_risk,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Workers is the planned worker count of a deadline job.
	Workers          int        `json:"workers,omitempty"`
	Deadline         *time.Time `json:"deadline,omitempty"`
	ExpectedFinish   *time.Time `json:"expected_finish,omitempty"`
	EarliestFeasible *time.Time `json:"earliest_feasible,omitempty"`
}

// deadlineGate runs admission control for a deadline job (planner.AdmitJob
// over the cluster's capacity and the live jobs) and answers a dry run.
// done means the handler's answer is err (nil: the dry run was written).
//
// A submission that replays an Idempotency-Key (key) is answered with the
// job the key made, before admission: the retry of an admitted job is that
// job, and admitting it again beside itself could refuse it.
func (s *Server) deadlineGate(c echo.Context, spec jobs.Spec, key string) (done bool, err error) {
	dry := false
	// Given bare (?dry_run) or empty it is refused, not read as absent:
	// that created the job a client asked only to try.
	if c.QueryParams().Has("dry_run") {
		if dry, err = strconv.ParseBool(c.QueryParam("dry_run")); err != nil {
			return true, badQuery("dry_run", "must be true or false")
		}
	}
	if !spec.HasDeadline() {
		if dry {
			return true, writeJSON(c, http.StatusOK, DryRun{Admitted: true})
		}
		return false, nil
	}
	if !dry && key != "" {
		ctx, cancel := s.storeCtx(c)
		job, found, err := s.store.Replay(ctx, tenantOf(c).Name, spec, key)
		cancel()
		if err != nil {
			return true, err
		}
		if found {
			c.Response().Header().Set(echo.HeaderLocation, "/v1/jobs/"+job.ID)
			return true, writeJSON(c, http.StatusOK, job)
		}
	}
	if s.cluster == nil {
		return true, newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "no cluster is attached to plan deadline jobs on", "")
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	capacity, err := s.cluster.Capacity(ctx)
	if err != nil {
		return true, fmt.Errorf("deadline admission: capacity: %w", err)
	}
	live, err := s.store.ListActive(ctx)
	if err != nil {
		return true, err
	}
	now := s.cfg.Now()
	a := planner.AdmitJob(capacity, live, spec, planner.DefaultConfig(), now)
	due := spec.DeadlineAt(now)
	ans := DryRun{Admitted: a.Admitted, AtRisk: a.AtRisk, Reason: a.Reason, Workers: a.Workers, Deadline: &due}
	if !a.ExpectedFinish.IsZero() {
		ans.ExpectedFinish = &a.ExpectedFinish
	}
	if !a.EarliestFeasible.IsZero() {
		ans.EarliestFeasible = &a.EarliestFeasible
	}
	if dry {
		return true, writeJSON(c, http.StatusOK, ans)
	}
	if !a.Admitted {
		p := newProblem(http.StatusUnprocessableEntity, ProblemDeadline, "the deadline cannot be guaranteed", a.Reason)
		p.p.EarliestFeasible = ans.EarliestFeasible
		p.p.Errors = []jobs.FieldError{{Field: deadlineField(spec), Reason: a.Reason}}
		return true, p
	}
	return false, nil
}

func deadlineField(s jobs.Spec) string {
	if s.Within != "" {
		return "within"
	}
	return "deadline"
}
