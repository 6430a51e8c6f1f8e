package jobs

import (
	"errors"
	"strings"
	"testing"
)

func TestApplyMergePatch(t *testing.T) {
	j := Job{ID: "j-1", State: Running, Spec: validSpec().WithDefaults()}
	tests := []struct {
		name    string
		patch   string
		check   func(Spec) bool
		errWant string // field at fault
	}{
		{"max", `{"spec":{"workers":{"max":5}}}`, func(s Spec) bool { return s.Workers == WorkerRange{Min: 1, Max: 5} }, ""},
		{"priority", `{"spec":{"priority":"opportunistic"}}`, func(s Spec) bool { return s.Priority == Opportunistic }, ""},
		{"empty", `{}`, func(s Spec) bool { return s.Workers.Max == 3 }, ""},
		{"min over max", `{"spec":{"workers":{"min":4}}}`, nil, "spec.workers.max"},
		{"name", `{"spec":{"name":"other"}}`, nil, "spec.name"},
		{"remove labels is a change", `{"spec":{"gpus_per_worker":1}}`, nil, "spec.gpus_per_worker"},
		{"state is read-only", `{"state":"running"}`, nil, "state"},
		{"unknown spec field", `{"spec":{"bogus":1}}`, nil, "spec.bogus"},
		{"spec not object", `{"spec":3}`, nil, "spec"},
		{"delete priority gives default", `{"spec":{"priority":null}}`, func(s Spec) bool { return s.Priority == Guaranteed }, ""},
		{"wrong type", `{"spec":{"workers":{"max":"x"}}}`, nil, "spec.workers.max"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyMergePatch(j, []byte(tc.patch))
			if tc.errWant != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Fields[0].Field != tc.errWant {
					t.Fatalf("want %s at fault, got %v", tc.errWant, err)
				}
				return
			}
			if err != nil || !tc.check(got) {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
	var de *DecodeError
	if _, err := ApplyMergePatch(j, []byte(`{`)); !errors.As(err, &de) {
		t.Errorf("malformed patch: %v", err)
	}
}

func TestPin(t *testing.T) {
	j := Job{Spec: validSpec()}
	for n, ok := range map[int]bool{0: true, 1: true, 3: true, 4: false, -1: false} {
		if err := j.Pin(n); (err == nil) != ok {
			t.Errorf("Pin(%d) = %v", n, err)
		}
	}
}

// A deadline job's size is the planner's (the least share that meets its
// deadline, admitted against the other deadline jobs): a pin was accepted
// ("pinned to 1 workers") and then ignored while the job ran at 3.
func TestPinRefusesADeadlineJob(t *testing.T) {
	s := validSpec()
	s.Within = "1h"
	j := Job{Spec: s}
	err := j.Pin(2)
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "deadline") || j.Workers.Pinned != 0 {
		t.Errorf("Pin(2) of a deadline job: %v, pinned %d; want a validation error naming the deadline", err, j.Workers.Pinned)
	}
	if err := j.Pin(0); err != nil {
		t.Errorf("unpinning a deadline job: %v", err)
	}
}
