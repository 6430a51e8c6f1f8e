package api

import (
	"context"
	"net/http"

	"github.com/edl-nomad/edl/api/ui"
	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// dashboardRedirect godoc
//
//	@Summary	The web dashboard (redirects to /ui/): jobs, a job's charts and events, the cluster
//	@Tags		operations
//	@Success	301
//	@Router		/ui [get]
func (s *Server) dashboardRedirect(c echo.Context) error {
	return c.Redirect(http.StatusMovedPermanently, "/ui/")
}

// dashboard serves the dashboard's embedded files under /ui/. They need no
// token: the page asks for one and sends it with each API call.
func (s *Server) dashboard() echo.HandlerFunc {
	return echo.WrapHandler(http.StripPrefix("/ui", ui.Handler()))
}

// workerLister is the part of a cluster that tells where a job's workers
// run; the cluster page shows it when the attached cluster has it.
type workerLister interface {
	Workers(ctx context.Context, jobID string) ([]jobs.Worker, error)
}

// fillPlacement sets each holding's workers per node, when the cluster can
// tell; a job it cannot list keeps no placement.
func (s *Server) fillPlacement(ctx context.Context, hs []Holding) {
	wl, ok := s.cluster.(workerLister)
	if !ok {
		return
	}
	for i := range hs {
		ws, err := wl.Workers(ctx, hs[i].Job)
		if err != nil {
			continue
		}
		for _, w := range ws {
			if !w.State.Live() {
				continue
			}
			if hs[i].Placement == nil {
				hs[i].Placement = map[string]int{}
			}
			hs[i].Placement[w.Node]++
		}
	}
}
