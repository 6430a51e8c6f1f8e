package records

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestNewIDIsValid(t *testing.T) {
	now := time.UnixMilli(1700000000000)
	a, b := NewID("j-", now), NewID("j-", now)
	if !strings.HasPrefix(a, "j-") || !ValidID(a) || a == b {
		t.Errorf("NewID = %q, %q: want two different valid IDs with the prefix", a, b)
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"j-lo5n1ab0c0ffee00": true, "s-1": true, "ab": false, "": false,
		"J-UPPER": false, "j-1/../x": false, "j-1:job": false, strings.Repeat("a", 65): false, strings.Repeat("a", 64): true,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestCASReply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		res     any
		ids     []string
		ok      bool
		wantErr func(error) bool
	}{
		{"gone", int64(-1), nil, false, func(err error) bool { return errors.Is(err, jobs.ErrNotFound) }},
		{"lost the race", int64(0), nil, false, func(err error) bool { return err == nil }},
		{"written", []any{int64(1), "1-0", "1-1"}, []string{"1-0", "1-1"}, true, func(err error) bool { return err == nil }},
		{"written, no events", []any{int64(1)}, []string{}, true, func(err error) bool { return err == nil }},
		{"odd reply", "OK", nil, false, func(err error) bool { return err != nil && strings.Contains(err.Error(), "unexpected reply OK") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, ok, err := CASReply(tc.res)
			if !tc.wantErr(err) || ok != tc.ok || strings.Join(ids, ",") != strings.Join(tc.ids, ",") {
				t.Errorf("CASReply(%v) = %v, %v, %v; want %v, %v", tc.res, ids, ok, err, tc.ids, tc.ok)
			}
		})
	}
}

func TestWrapKeepsValidationErrors(t *testing.T) {
	inv := jobs.Invalid("after", "not an event id")
	if got := Wrap(inv, "events of j-1"); got != inv {
		t.Errorf("Wrap(validation) = %v, want it unchanged", got)
	}
	if Wrap(nil, "x") != nil {
		t.Error("Wrap(nil) is not nil")
	}
	base := errors.New("connection refused")
	if got := Wrap(base, "events of j-1"); !errors.Is(got, base) || got.Error() != "events of j-1: connection refused" {
		t.Errorf("Wrap = %v", got)
	}
}
