package api

import (
	"net/http"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// ProgressHistory is a page of a job's progress history, oldest first.
type ProgressHistory struct {
	Points []jobs.ProgressPoint `json:"points"`
	// Next is the since value for the next page (the last point's ID), or
	// the since given when the page is empty.
	Next string `json:"next,omitempty" example:"1700000000000-0"`
}

// jobProgress godoc
//
//	@Summary		A job's progress over time
//	@Description	The bounded history of what the workers reported: loss, samples/s, step, epoch, world size and the job's worker counts, at most one point a second (a point that changes the world size or the epoch is always kept, and so is the job's last progress, written when it ends), the newest few thousand per job. Poll with since= the previous page's next to get only new points.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Produce		json
//	@Param			id		path		string	true	"job ID"
//	@Param			since	query		string	false	"points after this point ID (exclusive), or after this RFC 3339 time"
//	@Param			limit	query		int		false	"page size, 1-5000 (default 5000)"
//	@Success		200		{object}	ProgressHistory
//	@Failure		400		{object}	Problem
//	@Failure		401		{object}	Problem
//	@Failure		404		{object}	Problem	"no such job (or another tenant's)"
//	@Failure		429		{object}	Problem
//	@Router			/v1/jobs/{id}/progress [get]
func (s *Server) jobProgress(c echo.Context) error {
	since := c.QueryParam("since")
	if since != "" && !jobs.ValidEventID(since) {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			return badQuery("since", "must be a point ID (the next of a previous page) or an RFC 3339 time")
		}
		since = jobs.ProgressPointIDAt(t)
	}
	limit, err := queryLimit(c, jobs.MaxProgressLimit, jobs.MaxProgressLimit)
	if err != nil {
		return err
	}
	j, err := s.ownJob(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	pts, err := s.store.ProgressHistory(ctx, j.ID, since, limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, ProgressHistory{Points: pts, Next: pageNext(since, len(pts), func() string { return pts[len(pts)-1].ID })})
}
