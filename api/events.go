package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// EventPage is a page of a job's event log, oldest first.
type EventPage struct {
	Events []jobs.Event `json:"events"`
	// Next is the after value for the next page: the last event's ID, or the
	// after given when the page is empty.
	Next string `json:"next,omitempty" example:"1700000000000-0"`
}

// jobEvents godoc
//
//	@Summary		A job's event log
//	@Description	State changes, scaling decisions with their reason, worker joins and leaves, checkpoints, errors. As JSON pages, or, with follow=true (or Accept: text/event-stream), as Server-Sent Events: each event's SSE id is its ID, so a reconnect with Last-Event-ID resumes after it. The stream ends after the job's final state change.
//	@Tags			jobs
//	@Security		BearerAuth
//	@Produce		json
//	@Produce		text/event-stream
//	@Param			id				path		string	true	"job ID"
//	@Param			after			query		string	false	"return events after this ID"
//	@Param			limit			query		int		false	"page size, 1-500 (default 100)"
//	@Param			follow			query		bool	false	"stream as Server-Sent Events"
//	@Param			Last-Event-ID	header		string	false	"resume a stream after this ID"
//	@Success		200				{object}	EventPage
//	@Failure		400				{object}	Problem
//	@Failure		404				{object}	Problem
//	@Router			/v1/jobs/{id}/events [get]
func (s *Server) jobEvents(c echo.Context) error {
	j, err := s.ownJob(c)
	if err != nil {
		return err
	}
	after := c.QueryParam("after")
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" {
		after = id
	}
	if after != "" && !jobs.ValidEventID(after) {
		return badQuery("after", "not an event ID")
	}
	limit := 100
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			return badQuery("limit", "must be between 1 and 500")
		}
		limit = n
	}
	follow := c.QueryParam("follow")
	if follow == "true" || follow == "1" || strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/event-stream") {
		return s.streamEvents(c, j, after)
	}
	if follow != "" && follow != "false" && follow != "0" {
		return badQuery("follow", "must be true or false")
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	evs, err := s.store.Events(ctx, j.ID, after, limit)
	if err != nil {
		return err
	}
	next := after
	if len(evs) > 0 {
		next = evs[len(evs)-1].ID
	}
	return writeJSON(c, http.StatusOK, EventPage{Events: evs, Next: next})
}

// streamEvents sends the log as Server-Sent Events until the client leaves,
// the server stops, or the job has reached a terminal state and every event
// up to it has been sent.
func (s *Server) streamEvents(c echo.Context, j jobs.Job, after string) error {
	ctx := c.Request().Context()
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	w.Flush()
	last := after
	// Each XREAD blocks at most poll, because a blocked read does not notice
	// that the client left or the server is stopping.
	poll := min(s.cfg.SSEKeepAlive, time.Second)
	lastWrite := time.Now()
	for {
		evs, err := s.store.WaitEvents(ctx, j.ID, last, 100, poll)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.Warn("event stream ended", "job", j.ID, "err", err)
			return nil
		}
		if len(evs) == 0 {
			if time.Since(lastWrite) < s.cfg.SSEKeepAlive {
				continue
			}
			// Quiet: a keep-alive, or the end if the job finished earlier.
			cur, err := s.store.Get(ctx, j.ID)
			if err != nil || cur.State.Terminal() {
				return nil
			}
			fmt.Fprint(w, ": keep-alive\n\n")
			w.Flush()
			lastWrite = time.Now()
			continue
		}
		done := false
		for _, ev := range evs {
			if err := writeSSE(w, ev); err != nil {
				return nil
			}
			last = ev.ID
			if ev.Type == jobs.EventState {
				if to, _ := ev.Data["to"].(string); jobs.State(to).Terminal() {
					done = true
				}
			}
		}
		w.Flush()
		lastWrite = time.Now()
		if done {
			return nil
		}
	}
}

func writeSSE(w *echo.Response, ev jobs.Event) error {
	if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: ", ev.ID, ev.Type); err != nil {
		return err
	}
	if err := jsonEncode(w, ev); err != nil { // ends with the newline
		return err
	}
	_, err := fmt.Fprint(w, "\n")
	return err
}
