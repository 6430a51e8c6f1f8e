package api

import (
	"context"
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
	return serveLog(s, c, s.jobLog(j), func(evs []jobs.Event, next string) any { return EventPage{Events: evs, Next: next} })
}

// jobLog is the job's event log: a stream of it ends after the job's
// final state change, woken by the server's one job Follower.
func (s *Server) jobLog(j jobs.Job) eventFeed[jobs.Event] {
	return eventFeed[jobs.Event]{
		what:   "job " + j.ID,
		follow: func() (<-chan struct{}, func()) { return s.follow.Follow(j.ID) },
		page: func(ctx context.Context, after string, n int) ([]jobs.Event, error) {
			return s.store.Events(ctx, j.ID, after, n)
		},
		head: func(ev jobs.Event) (string, string) { return ev.ID, string(ev.Type) },
		ends: func(ev jobs.Event) bool {
			to, _ := ev.Data["to"].(string)
			return ev.Type == jobs.EventState && jobs.State(to).Terminal()
		},
		ended: func(ctx context.Context) (bool, error) {
			cur, err := s.store.Get(ctx, j.ID)
			return err == nil && cur.State.Terminal(), err
		},
	}
}

// eventFeed is an event log (a job's, a sweep's) as serveLog and
// streamLog send it: its pages, each event's ID and type, whether an
// event ends the log (its owner's terminal state), whether the owner has
// ended (asked when the log is quiet: its terminal event may have been
// trimmed), and follow, which gives the channel that says the log may
// have grown (a Follower's) and the func that lets it go.
type eventFeed[E any] struct {
	what   string // "job j-1", for the log line when the stream fails
	follow func() (woken <-chan struct{}, unfollow func())
	page   func(ctx context.Context, after string, n int) ([]E, error)
	head   func(E) (id, typ string)
	ends   func(E) bool
	ended  func(ctx context.Context) (bool, error)
}

// serveLog answers a request for f's log (parseEventQuery): with follow,
// Server-Sent Events (streamLog); else one page of it, which pageOf wraps
// with its next (pageNext) for the JSON answer.
func serveLog[E any](s *Server, c echo.Context, f eventFeed[E], pageOf func(evs []E, next string) any) error {
	q, err := parseEventQuery(c)
	if err != nil {
		return err
	}
	if q.follow {
		return streamLog(s, c, q.after, f)
	}
	ctx, cancel := s.storeCtx(c)
	defer cancel()
	evs, err := f.page(ctx, q.after, q.limit)
	if err != nil {
		return err
	}
	next := pageNext(q.after, len(evs), func() string {
		id, _ := f.head(evs[len(evs)-1])
		return id
	})
	return writeJSON(c, http.StatusOK, pageOf(evs, next))
}

// streamLog sends f's log after after as Server-Sent Events until the
// client leaves, the server stops, or the owner ended and every event up
// to its end has been sent. It holds no Redis connection while idle: the
// server's one Follower wakes it when the log may have grown, and it then
// reads the new events with a short XRANGE; a quiet stream gets a
// keep-alive comment every SSEKeepAlive.
func streamLog[E any](s *Server, c echo.Context, after string, f eventFeed[E]) error {
	woken, unfollow := f.follow()
	defer unfollow()
	release, err := s.openStream(c, "; close one or read pages without follow")
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.streamCtx(c)
	defer cancel()
	w := c.Response()
	last := after
	quiet := time.NewTicker(s.cfg.SSEKeepAlive)
	defer quiet.Stop()
	ending := false // the owner was seen ended: send what is left, then end
	for {
		wrote, end, ok := sendPages(ctx, s, w, f, &last)
		if !ok || ending || end {
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
			if done, err := f.ended(ctx); err != nil {
				return nil
			} else if done {
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

// sendPages writes every event of f after *last, in pages, moving *last
// on: wrote, some; end, one of them ends the log; ok false, the stream is
// over (the client left, the server stops, the log could not be read).
func sendPages[E any](ctx context.Context, s *Server, w *echo.Response, f eventFeed[E], last *string) (wrote, end, ok bool) {
	for {
		evs, err := f.page(ctx, *last, 100)
		if ctx.Err() != nil {
			return wrote, end, false
		}
		if err != nil {
			s.log.Warn("event stream ended", "of", f.what, "err", err)
			return wrote, end, false
		}
		for _, ev := range evs {
			id, typ := f.head(ev)
			if err := writeSSE(w, id, typ, ev); err != nil {
				return wrote, end, false
			}
			*last = id
			end = end || f.ends(ev)
		}
		if len(evs) > 0 {
			w.Flush()
			wrote = true
		}
		if len(evs) < 100 {
			return wrote, end, true
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
