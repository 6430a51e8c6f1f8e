package nomadx

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/nomad/api"
)

// ErrNotOurs is returned when a Nomad job with the derived ID exists but was
// not registered by edl for this edl job; nomadx never scales or purges it.
var ErrNotOurs = errors.New("nomad job exists but does not belong to this edl job")

// Error is a Nomad answer edl cannot fix by retrying: a 4xx, or a 5xx that
// outlived the retries. Status and Message are Nomad's own; the planner turns
// them into job events.
type Error struct {
	Op       string // register, scale, stop, deregister, read
	NomadJob string
	Status   int
	Message  string // Nomad's plain-text body
	err      error
}

func (e *Error) Error() string {
	return fmt.Sprintf("nomad %s %s: %d %s", e.Op, e.NomadJob, e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.err }

// Client reports whether Nomad refused the request itself (4xx): retrying
// the same request will not help.
func (e *Error) Client() bool { return e.Status >= 400 && e.Status < 500 }

// NotFound reports a 404.
func (e *Error) NotFound() bool { return e.Status == http.StatusNotFound }

// statusOf extracts the HTTP status of a nomad/api error, 0 when the
// request got no answer.
func statusOf(err error) (int, string) {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		return ue.StatusCode(), ue.Body()
	}
	var uep *api.UnexpectedResponseError
	if errors.As(err, &uep) {
		return uep.StatusCode(), uep.Body()
	}
	return 0, ""
}

// retryable says whether another try may succeed: 5xx, 429, and requests
// that got no answer (time-out, connection refused or reset). parent is the
// operation's context: once it is done nothing is retried.
func retryable(parent context.Context, err error) bool {
	var p *permanentError
	if parent.Err() != nil || errors.As(err, &p) {
		return false
	}
	status, _ := statusOf(err)
	if status == 0 {
		return true
	}
	return status >= 500 || status == http.StatusTooManyRequests
}

// wrap turns a final nomad/api error into *Error when Nomad answered.
func wrap(op, nomadJob string, err error) error {
	if err == nil {
		return nil
	}
	if status, body := statusOf(err); status != 0 {
		return &Error{Op: op, NomadJob: nomadJob, Status: status, Message: body, err: err}
	}
	return fmt.Errorf("nomad %s %s: %w", op, nomadJob, err)
}

// notOursError is a Nomad job with edl's ID but another edl_job_id meta.
type notOursError struct{ nomadJob, meta string }

func (e *notOursError) Error() string {
	return fmt.Sprintf("nomad job %s (meta %s=%q): %v", e.nomadJob, MetaJobID, e.meta, ErrNotOurs)
}
func (e *notOursError) Unwrap() error { return ErrNotOurs }

// noGroupError is a Nomad job with edl's ID and meta but no workers group.
type noGroupError struct{ nomadJob string }

func (e *noGroupError) Error() string {
	return fmt.Sprintf("nomad job %s has no group %q: %v", e.nomadJob, GroupName, ErrNotOurs)
}
func (e *noGroupError) Unwrap() error { return ErrNotOurs }
