package api

import (
	"fmt"
	"net/http"
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
	q, err := parseEventQuery(c)
	if err != nil {
		return err
	}
	if q.follow {
		return s.streamEvents(c, j, q.after)
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	evs, err := s.store.Events(ctx, j.ID, q.after, q.limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, EventPage{Events: evs, Next: pageNext(q.after, len(evs), func() string { return evs[len(evs)-1].ID })})
}

// streamEvents sends the log as Server-Sent Events until the client leaves,
// the server stops, or the job has reached a terminal state and every event
// up to it has been sent. It holds no Redis connection while idle: the
// server's one Follower wakes it when the job's log may have grown, and it
// then reads the new events with a short XRANGE.
func (s *Server) streamEvents(c echo.Context, j jobs.Job, after string) error {
	release, err := s.openStream(c, "; close one or read pages without follow")
	if err != nil {
		return err
	}
	defer release()
	woken, unfollow := s.follow.Follow(j.ID)
	defer unfollow()

	ctx, cancel := s.streamCtx(c)
	defer cancel()
	w := c.Response()
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
				if err := writeSSE(w, ev.ID, string(ev.Type), ev); err != nil {
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
