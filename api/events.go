package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
//	@Failure		400				{object}	Problem	"after or Last-Event-ID is not an event ID (two unsigned 64-bit integers, MS-SEQ)"
//	@Failure		404				{object}	Problem
//	@Failure		429				{object}	Problem	"the tenant holds its most event streams open (follow=true); Retry-After"
//	@Failure		503				{object}	Problem	"the store is unavailable; Retry-After"
//	@Router			/v1/jobs/{id}/events [get]
func (s *Server) jobEvents(c echo.Context) error {
	j, err := s.ownJob(c)
	if err != nil {
		return err
	}
	after, param := c.QueryParam("after"), "after"
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" {
		after, param = id, "Last-Event-ID"
	}
	if after != "" && !jobs.ValidEventID(after) {
		return badQuery(param, "not an event ID: MS-SEQ, two unsigned 64-bit integers (as an event's id)")
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
// up to it has been sent. It holds no Redis connection while idle: the
// server's one Follower wakes it when the job's log may have grown, and it
// then reads the new events with a short XRANGE.
func (s *Server) streamEvents(c echo.Context, j jobs.Job, after string) error {
	tenant := tenantOf(c).Name
	if !s.streams.acquire(tenant, s.cfg.MaxStreamsPerTenant) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterStreams))
		return newProblem(http.StatusTooManyRequests, ProblemTooManyStreams, "too many open event streams",
			fmt.Sprintf("tenant %s may hold %d event streams open at once; close one or read pages without follow", tenant, s.cfg.MaxStreamsPerTenant))
	}
	defer s.streams.release(tenant)
	woken, unfollow := s.follow.Follow(j.ID)
	defer unfollow()

	ctx, cancel := s.streamCtx(c)
	defer cancel()
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	w.Flush()
	last := after
	quiet := time.NewTicker(s.cfg.SSEKeepAlive)
	defer quiet.Stop()
	ending := false // the job was seen terminal: send what is left, then end
	for {
		// Everything after last, in pages.
		wrote := false
		for {
			evs, err := s.store.Events(ctx, j.ID, last, 100)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				s.log.Warn("event stream ended", "job", j.ID, "err", err)
				return nil
			}
			for _, ev := range evs {
				if err := writeSSE(w, ev); err != nil {
					return nil
				}
				last = ev.ID
				if ev.Type == jobs.EventState {
					if to, _ := ev.Data["to"].(string); jobs.State(to).Terminal() {
						ending = true
					}
				}
			}
			if len(evs) > 0 {
				w.Flush()
				wrote = true
			}
			if len(evs) < 100 {
				break
			}
		}
		if ending {
			return nil
		}
		if wrote {
			quiet.Reset(s.cfg.SSEKeepAlive)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-woken:
		case <-quiet.C:
			// Quiet: a keep-alive, or the end if the job finished without
			// a terminal state event in reach (trimmed, say).
			cur, err := s.store.Get(ctx, j.ID)
			if err != nil {
				return nil
			}
			if cur.State.Terminal() {
				ending = true
				continue
			}
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			w.Flush()
		}
	}
}

// retryAfterStreams is the Retry-After (seconds) of a 429 for too many streams.
const retryAfterStreams = 5

// streamCounts counts each tenant's open event streams in this process.
type streamCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func newStreamCounts() *streamCounts { return &streamCounts{n: map[string]int{}} }

// acquire takes one of tenant's max streams, or says there is none left.
func (sc *streamCounts) acquire(tenant string, max int) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.n[tenant] >= max {
		return false
	}
	sc.n[tenant]++
	return true
}

func (sc *streamCounts) release(tenant string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.n[tenant]--; sc.n[tenant] <= 0 {
		delete(sc.n, tenant)
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
