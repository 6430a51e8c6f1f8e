package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/labstack/echo/v4"
)

// ProblemContentType is the media type of every error body (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem detail. Type is a stable URN per kind of
// problem; clients branch on it, not on Title or Detail.
type Problem struct {
	Type     string `json:"type" example:"urn:edl:problem:validation"`
	Title    string `json:"title" example:"the request has invalid fields"`
	Status   int    `json:"status" example:"422"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty" example:"/v1/jobs"`
	// Errors lists each offending field (dotted JSON path) with a reason.
	Errors []jobs.FieldError `json:"errors,omitempty"`
	// EarliestFeasible, on a refused deadline job, is the earliest deadline
	// that would be admitted now.
	EarliestFeasible *time.Time `json:"earliest_feasible,omitempty"`
}

// Problem types. They are part of the API: never rename one.
const (
	ProblemValidation          = "urn:edl:problem:validation"
	ProblemMalformedJSON       = "urn:edl:problem:malformed-json"
	ProblemUnauthorized        = "urn:edl:problem:unauthorized"
	ProblemForbidden           = "urn:edl:problem:forbidden"
	ProblemNotFound            = "urn:edl:problem:not-found"
	ProblemMethodNotAllowed    = "urn:edl:problem:method-not-allowed"
	ProblemInvalidTransition   = "urn:edl:problem:invalid-transition"
	ProblemJobFinished         = "urn:edl:problem:job-finished"
	ProblemConflict            = "urn:edl:problem:conflict"
	ProblemIdempotencyMismatch = "urn:edl:problem:idempotency-mismatch"
	ProblemRateLimited         = "urn:edl:problem:rate-limited"
	ProblemTooLarge            = "urn:edl:problem:payload-too-large"
	ProblemUnsupportedMedia    = "urn:edl:problem:unsupported-media-type"
	ProblemUnavailable         = "urn:edl:problem:unavailable"
	ProblemRequestTimeout      = "urn:edl:problem:request-timeout"
	ProblemTooManyStreams      = "urn:edl:problem:too-many-streams"
	ProblemInternal            = "urn:edl:problem:internal"
	ProblemDeadline            = "urn:edl:problem:deadline-infeasible"
)

// RetryAfterUnavailable is the Retry-After (seconds) of a 503.
const RetryAfterUnavailable = 1

// problemError is a handler's way to answer with a specific problem.
type problemError struct {
	p   Problem
	err error // the cause, for logs
}

func (e *problemError) Error() string {
	if e.err != nil {
		return e.p.Title + ": " + e.err.Error()
	}
	return e.p.Title
}

func (e *problemError) Unwrap() error { return e.err }

func newProblem(status int, typ, title, detail string) *problemError {
	return &problemError{p: Problem{Type: typ, Title: title, Status: status, Detail: detail}}
}

// problemFor maps any error a handler returns to the problem to send.
func problemFor(err error) (Problem, bool) {
	var pe *problemError
	var ve *jobs.ValidationError
	var de *jobs.DecodeError
	var te *jobs.TransitionError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &pe):
		return pe.p, false
	case errors.As(err, &ve):
		return Problem{Type: ProblemValidation, Title: "the request has invalid fields", Status: http.StatusUnprocessableEntity, Errors: ve.Fields}, false
	case errors.As(err, &de):
		return Problem{Type: ProblemMalformedJSON, Title: "the body is not well-formed JSON", Status: http.StatusBadRequest, Detail: de.Error()}, false
	case errors.Is(err, jobs.ErrNotFound):
		return Problem{Type: ProblemNotFound, Title: "no such job", Status: http.StatusNotFound}, false
	case errors.As(err, &te):
		return Problem{Type: ProblemInvalidTransition, Title: "the job cannot make that change in its state", Status: http.StatusConflict, Detail: te.Error()}, false
	case errors.Is(err, jobs.ErrIdempotencyMismatch):
		return Problem{Type: ProblemIdempotencyMismatch, Title: "Idempotency-Key reused with a different body", Status: http.StatusUnprocessableEntity}, false
	case errors.Is(err, jobs.ErrConflict):
		return Problem{Type: ProblemConflict, Title: "too many concurrent updates; retry", Status: http.StatusConflict}, false
	case errors.As(err, &he):
		return httpErrorProblem(he), he.Code >= 500
	case errors.Is(err, context.Canceled):
		// The request's context ended: the server is shutting down (a
		// client that left reads no answer).
		return Problem{Type: ProblemUnavailable, Title: "the server is shutting down; retry", Status: http.StatusServiceUnavailable}, true
	case errors.Is(err, context.DeadlineExceeded):
		return Problem{Type: ProblemUnavailable, Title: "the store did not answer in time", Status: http.StatusServiceUnavailable}, true
	case jobstore.Unavailable(err):
		return Problem{Type: ProblemUnavailable, Title: "the store is unavailable; retry later", Status: http.StatusServiceUnavailable}, true
	}
	return Problem{Type: ProblemInternal, Title: "internal error", Status: http.StatusInternalServerError}, true
}

func httpErrorProblem(he *echo.HTTPError) Problem {
	p := Problem{Status: he.Code, Title: strings.ToLower(http.StatusText(he.Code))}
	switch he.Code {
	case http.StatusNotFound:
		p.Type, p.Title = ProblemNotFound, "no such resource"
	case http.StatusMethodNotAllowed:
		p.Type = ProblemMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		p.Type = ProblemTooLarge
	case http.StatusUnsupportedMediaType:
		p.Type = ProblemUnsupportedMedia
	case http.StatusUnauthorized:
		p.Type = ProblemUnauthorized
	case http.StatusServiceUnavailable:
		p.Type = ProblemUnavailable
	default:
		if he.Code >= 500 {
			p.Type = ProblemInternal
		} else {
			p.Type = "about:blank"
		}
	}
	if m, ok := he.Message.(string); ok && m != http.StatusText(he.Code) {
		p.Detail = m
	}
	return p
}

// handleError is echo's HTTPErrorHandler: every error becomes problem+json.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p, internal := problemFor(err)
	p.Instance = c.Request().URL.Path
	switch {
	case p.Status == http.StatusServiceUnavailable:
		// Redis down or restarting: the client should come back, and
		// says so in a way that retrying clients and proxies understand.
		if c.Response().Header().Get("Retry-After") == "" {
			c.Response().Header().Set("Retry-After", strconv.Itoa(RetryAfterUnavailable))
		}
		if m := c.Request().Method; p.Detail == "" && m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions {
			// The store may have taken the write before the answer was
			// given up on: a blind retry of a submit makes a second job.
			p.Detail = unavailableWrite
		}
		s.log.Warn("request failed: unavailable", "method", c.Request().Method, "path", p.Instance, "err", err)
	case internal:
		s.log.Error("request failed", "method", c.Request().Method, "path", p.Instance, "err", err)
	}
	if err := writeProblem(c, p); err != nil {
		s.log.Debug("write problem", "err", err)
	}
}

// unavailableWrite is the detail of a 503 to a request that changes
// something: its outcome is unknown.
const unavailableWrite = "the request may still take effect: retry a submit with the same Idempotency-Key, and read the job or sweep before retrying another change"

func writeProblem(c echo.Context, p Problem) error {
	if c.Request().Method == http.MethodHead {
		return c.NoContent(p.Status)
	}
	c.Response().Header().Set(echo.HeaderContentType, ProblemContentType)
	c.Response().WriteHeader(p.Status)
	return jsonEncode(c.Response(), p)
}

func unauthorized(detail string) error {
	return newProblem(http.StatusUnauthorized, ProblemUnauthorized, "missing or invalid bearer token", detail)
}

func unsupportedMedia(got string, want ...string) error {
	return newProblem(http.StatusUnsupportedMediaType, ProblemUnsupportedMedia, "unsupported content type",
		fmt.Sprintf("got %q; send %s", got, strings.Join(want, " or ")))
}
