package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A refused deadline job's problem carries earliest_feasible, the deadline
// that would be admitted now: edl submit prints it (it printed the reason
// only, twice, and left the user to guess a deadline).
func TestAPIErrorPrintsEarliestFeasible(t *testing.T) {
	body := `{"type":"urn:edl:problem:deadline-infeasible","title":"the deadline cannot be guaranteed","status":422,` +
		`"detail":"even at 4 workers it would finish 43 s after its deadline","instance":"/v1/jobs",` +
		`"errors":[{"field":"within","reason":"even at 4 workers it would finish 43 s after its deadline"}],` +
		`"earliest_feasible":"2026-12-07T04:05:05Z"}`
	resp := &http.Response{StatusCode: 422, Body: io.NopCloser(strings.NewReader(body))}
	msg := readAPIError(resp, "POST", "/v1/jobs").Error()
	if !strings.Contains(msg, "earliest feasible deadline now: 2026-12-07T04:05:05Z") {
		t.Errorf("%q does not give the earliest feasible deadline", msg)
	}
	if n := strings.Count(msg, "43 s after its deadline"); n != 1 {
		t.Errorf("%q says the reason %d times, want once", msg, n)
	}
	// A validation problem still lists every field.
	body = `{"type":"urn:edl:problem:validation","title":"the request has invalid fields","status":422,` +
		`"errors":[{"field":"workers.min","reason":"must be between 1 and 1024"},{"field":"workers.max","reason":"must be between 1 and 1024"}]}`
	resp = &http.Response{StatusCode: 422, Body: io.NopCloser(strings.NewReader(body))}
	msg = readAPIError(resp, "POST", "/v1/jobs").Error()
	if !strings.Contains(msg, "workers.min: must be") || !strings.Contains(msg, "workers.max: must be") || strings.Contains(msg, "earliest") {
		t.Errorf("validation problem printed as %q", msg)
	}
}
