package jobs

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors callers branch on (errors.Is).
var (
	// ErrNotFound: no job with that ID (or, to the API, not the caller's).
	ErrNotFound = errors.New("job not found")
	// ErrInvalidTransition: the state table does not allow the change.
	ErrInvalidTransition = errors.New("invalid state transition")
	// ErrConflict: an optimistic write kept losing races and gave up.
	ErrConflict = errors.New("concurrent update conflict")
	// ErrIdempotencyMismatch: an Idempotency-Key was reused with another body.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
)

// FieldError names one offending field (dotted JSON path) and why.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// ValidationError lists every field at fault in a spec, patch or query.
type ValidationError struct {
	Fields []FieldError `json:"errors"`
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Reason
	}
	return "invalid: " + strings.Join(parts, "; ")
}

// add records a field error; format follows fmt.Sprintf.
func (e *ValidationError) add(field, format string, args ...any) {
	e.Fields = append(e.Fields, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// orNil returns e when it holds errors, else nil (typed nil avoided).
func (e *ValidationError) orNil() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

// Invalid builds a ValidationError for one field.
func Invalid(field, reason string) error {
	return &ValidationError{Fields: []FieldError{{Field: field, Reason: reason}}}
}

// TransitionError says which change the state table refused.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("invalid state transition %s -> %s", e.From, e.To)
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }
