package api

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/jobs"
	"github.com/labstack/echo/v4"
)

// queryLimit reads the limit query parameter: def when it is absent, else
// an integer from 1 to max.
func queryLimit(c echo.Context, def, max int) (int, error) {
	l := c.QueryParam("limit")
	if l == "" {
		return def, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > max {
		return 0, badQuery("limit", "must be an integer between 1 and "+strconv.Itoa(max))
	}
	return n, nil
}

// eventQuery is what a request for an event log (a job's or a sweep's)
// asks for: the events after an ID, a page of limit, or a stream.
type eventQuery struct {
	after  string
	limit  int
	follow bool
}

// parseEventQuery reads after (or the Last-Event-ID header, which wins),
// limit (1-500, default 100) and follow (or Accept: text/event-stream).
func parseEventQuery(c echo.Context) (eventQuery, error) {
	after, param := c.QueryParam("after"), "after"
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" {
		after, param = id, "Last-Event-ID"
	}
	if after != "" && !jobs.ValidEventID(after) {
		return eventQuery{}, badQuery(param, "not an event ID: MS-SEQ, two unsigned 64-bit integers (as an event's id)")
	}
	limit, err := queryLimit(c, 100, 500)
	if err != nil {
		return eventQuery{}, err
	}
	q := eventQuery{after: after, limit: limit}
	follow := c.QueryParam("follow")
	if follow == "true" || follow == "1" || strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/event-stream") {
		q.follow = true
		return q, nil
	}
	if follow != "" && follow != "false" && follow != "0" {
		return eventQuery{}, badQuery("follow", "must be true or false")
	}
	return q, nil
}

// pageNext is a page's next (of events, of progress points): its last
// entry's ID, or after when it is empty.
func pageNext(after string, ids int, lastID func() string) string {
	if ids == 0 {
		return after
	}
	return lastID()
}

// openStream takes one of the tenant's streams (takeStream: 429 when it
// holds its most; hint says what to do instead) and answers 200 with the
// Server-Sent Events headers and the client's retry delay. release gives
// the stream back.
func (s *Server) openStream(c echo.Context, hint string) (release func(), err error) {
	release, err = s.takeStream(c, hint)
	if err != nil {
		return nil, err
	}
	s.streamWrites(c)
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	w.Flush()
	return release, nil
}

// takeStream takes one of the tenant's MaxStreamsPerTenant streams (event
// streams and followed logs alike: each holds a connection, and a followed
// log a file or a Nomad stream, until it ends), or answers 429 with
// Retry-After; hint says what to do instead. release gives it back.
func (s *Server) takeStream(c echo.Context, hint string) (release func(), err error) {
	tenant := tenantOf(c).Name
	if !s.streams.acquire(tenant, s.cfg.MaxStreamsPerTenant) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterStreams))
		return nil, newProblem(http.StatusTooManyRequests, ProblemTooManyStreams, "too many open streams",
			fmt.Sprintf("tenant %s may hold %d event streams and followed logs open at once%s", tenant, s.cfg.MaxStreamsPerTenant, hint))
	}
	return func() { s.streams.release(tenant) }, nil
}

// writeSSE writes one event: its id, its type and v as JSON data.
func writeSSE(w io.Writer, id, typ string, v any) error {
	if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: ", id, typ); err != nil {
		return err
	}
	if err := jsonEncode(w, v); err != nil { // ends with the newline
		return err
	}
	_, err := fmt.Fprint(w, "\n")
	return err
}
