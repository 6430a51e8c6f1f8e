package jobs

import (
	"errors"
	"strings"
	"testing"
)

func wantField(t *testing.T, err error, field, reasonHas string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError on %s, got %T %v", field, err, err)
	}
	for _, f := range ve.Fields {
		if f.Field == field && strings.Contains(f.Reason, reasonHas) {
			return
		}
	}
	t.Fatalf("want %s at fault (%q), got %v", field, reasonHas, ve.Fields)
}

// Duplicate keys were accepted (encoding/json keeps the last): refused
// now, in a spec, a scale request and a patch, named by their path.
func TestDuplicateKeysRefused(t *testing.T) {
	ex := string(exampleSpecJSON(t))
	tests := []struct{ name, body, field string }{
		{"top level", strings.Replace(ex, `"name": "mlp-synthetic",`, `"name": "mlp-synthetic", "name": "other",`, 1), "name"},
		{"nested", strings.Replace(ex, `"epochs": 6,`, `"epochs": 6, "epochs": 600000,`, 1), "trainer.builtin.epochs"},
		{"label", strings.Replace(ex, `{"example": "mlp"}`, `{"example": "mlp", "example": "x"}`, 1), "labels.example"},
		{"escaped spelling", strings.Replace(ex, `"priority": "guaranteed",`, `"priority": "guaranteed", "\u0070riority": "opportunistic",`, 1), "priority"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.body == ex {
				t.Fatal("edit did not apply")
			}
			_, err := DecodeSpec([]byte(tc.body))
			wantField(t, err, tc.field, "duplicate key")
		})
	}
	// Objects inside arrays are paths too; distinct objects may repeat keys.
	var v struct{ A []map[string]int }
	if err := DecodeStrict([]byte(`{"A":[{"x":1},{"x":2}]}`), &v); err != nil {
		t.Fatalf("same key in two objects refused: %v", err)
	}
	wantField(t, DecodeStrict([]byte(`{"A":[{"x":1},{"x":2,"x":3}]}`), &v), "A[1].x", "duplicate key")
	j := Job{ID: "j-1", State: Running, Spec: validSpec().WithDefaults()}
	for _, p := range []struct{ patch, field string }{
		{`{"spec":{"workers":{"max":2}},"spec":{"workers":{"max":3}}}`, "spec"},
		{`{"spec":{"workers":{"max":2},"workers":{"max":3}}}`, "spec.workers"},
		{`{"spec":{"workers":{"max":2,"max":3}}}`, "spec.workers.max"},
	} {
		_, err := ApplyMergePatch(j, []byte(p.patch))
		wantField(t, err, p.field, "duplicate key")
	}
}

// A number out of float64's range in a patch was "malformed JSON" (400);
// it is a field at fault (422) like in a submit.
func TestPatchNumberOutOfRange(t *testing.T) {
	j := Job{ID: "j-1", State: Running, Spec: validSpec().WithDefaults()}
	_, err := ApplyMergePatch(j, []byte(`{"spec":{"workers":{"min":1e400}}}`))
	wantField(t, err, "spec.workers.min", "integer")
	_, err = ApplyMergePatch(j, []byte(`{"spec":{"workers":{"max":1.5}}}`))
	wantField(t, err, "spec.workers.max", "integer")
	_, err = DecodeSpec([]byte(`{"name":"a","workers":{"min":1e400}}`))
	wantField(t, err, "workers.min", "integer")
	var de *DecodeError
	if _, err := ApplyMergePatch(j, []byte(`{"spec":{"workers":{"min":1e400}}`)); !errors.As(err, &de) {
		t.Errorf("truncated patch: want *DecodeError, got %T %v", err, err)
	}
}

// Members other than workers and priority are refused by name before the
// merge, whatever their value holds; a member repeating the current value
// is a no-op and allowed.
func TestPatchRefusesBeforeMerge(t *testing.T) {
	j := Job{ID: "j-1", State: Running, Spec: validSpec().WithDefaults()}
	tests := []struct{ name, patch, field, reason string }{
		{"unknown", `{"spec":{"bogus":{"a":{"b":[1,2,3]}}}}`, "spec.bogus", "unknown field"},
		{"immutable nested", `{"spec":{"trainer":{"builtin":{"epochs":9}}}}`, "spec.trainer", "cannot be changed"},
		{"unknown in workers", `{"spec":{"workers":{"max":2,"step":1}}}`, "spec.workers.step", "unknown field"},
		{"workers not an object", `{"spec":{"workers":3}}`, "spec.workers", "object"},
		{"spec null", `{"spec":null}`, "spec", "object"},
		{"priority wrong", `{"spec":{"priority":"urgent"}}`, "spec.priority", "must be"},
		{"priority type", `{"spec":{"priority":7}}`, "spec.priority", "string"},
		{"workers null", `{"spec":{"workers":null}}`, "spec.workers.min", "between"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ApplyMergePatch(j, []byte(tc.patch))
			wantField(t, err, tc.field, tc.reason)
		})
	}
	got, err := ApplyMergePatch(j, []byte(`{"spec":{"name":"mlp","gpu":null,"workers":{"max":4}}}`))
	if err != nil || got.Workers.Max != 4 || got.Name != "mlp" {
		t.Fatalf("no-op members with a change: %+v, %v", got.Workers, err)
	}
}

// A 1 MiB patch nested under a refused member cost 35x a flat one (it was
// decoded and merged in full, then refused); now it is refused by name
// without decoding its value. Allocations tell, where wall time would not.
func TestNestedPatchCostsLikeAFlatOne(t *testing.T) {
	j := Job{ID: "j-1", State: Running, Spec: validSpec().WithDefaults()}
	const size = 1 << 20
	flat := []byte(`{"spec":{"bogus":"` + strings.Repeat("a", size) + `"}}`)
	var nested strings.Builder
	nested.WriteString(`{"spec":{"bogus":[`)
	for nested.Len() < size {
		nested.WriteString(`{"k":{"a":1,"b":[1,2,{"c":3}]}},`)
	}
	nested.WriteString(`0]}}`)
	nb := []byte(nested.String())
	for _, b := range [][]byte{flat, nb} {
		_, err := ApplyMergePatch(j, b)
		wantField(t, err, "spec.bogus", "unknown field")
	}
	af := testing.AllocsPerRun(3, func() { _, _ = ApplyMergePatch(j, flat) })
	an := testing.AllocsPerRun(3, func() { _, _ = ApplyMergePatch(j, nb) })
	if an > 2*af+50 {
		t.Errorf("nested 1 MiB patch: %.0f allocations, flat one %.0f; want about the same", an, af)
	}
}

func TestEventIDs(t *testing.T) {
	for id, ok := range map[string]bool{
		"1700000000000-0": true,
		"0-0":             true,
		"18446744073709551615-18446744073709551615": true,
		"18446744073709551616-0":                    false, // 2^64
		"99999999999999999999-0":                    false,
		"1-18446744073709551616":                    false,
		"1":                                         false,
		"-1-0":                                      false,
		"1-0 ":                                      false,
	} {
		if got := ValidEventID(id); got != ok {
			t.Errorf("ValidEventID(%q) = %v, want %v", id, got, ok)
		}
	}
}

// encoding/json matches field names case-insensitively, so "Name" was read
// as "name" and {"name":..,"Name":..} kept the last silently; a key that
// names a field only by another case is refused, named by its path, with
// the right spelling. Map keys (labels) are data and keep their case.
func TestFieldNamesAreCaseSensitive(t *testing.T) {
	ex := string(exampleSpecJSON(t))
	tests := []struct{ name, body, field, want string }{
		{"top level", strings.Replace(ex, `"name": "mlp-synthetic",`, `"Name": "mlp-synthetic",`, 1), "Name", `"name"`},
		{"both spellings", strings.Replace(ex, `"name": "mlp-synthetic",`, `"name": "mlp-synthetic", "NAME": "other",`, 1), "NAME", `"name"`},
		{"nested", strings.Replace(ex, `"epochs": 6,`, `"Epochs": 6,`, 1), "trainer.builtin.Epochs", `"epochs"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.body == ex {
				t.Fatal("edit did not apply")
			}
			_, err := DecodeSpec([]byte(tc.body))
			wantField(t, err, tc.field, "case-sensitive")
			wantField(t, err, tc.field, tc.want)
		})
	}
	labels := strings.Replace(ex, `{"example": "mlp"}`, `{"example": "mlp", "Example": "x"}`, 1)
	if labels == ex {
		t.Fatal("edit did not apply")
	}
	s, err := DecodeSpec([]byte(labels))
	if err != nil || s.Labels["Example"] != "x" || s.Labels["example"] != "mlp" {
		t.Fatalf("labels differing in case: %v, %v", s.Labels, err)
	}
	// A field with no tag is named by its Go name, exactly.
	var v struct{ Count int }
	if err := DecodeStrict([]byte(`{"Count":1}`), &v); err != nil || v.Count != 1 {
		t.Fatalf("exact Go name: %v", err)
	}
	wantField(t, DecodeStrict([]byte(`{"count":1}`), &v), "count", `"Count"`)
}

// A well-formed body whose value a field's own decoder refuses (a deadline
// that is not an RFC 3339 time) was a 400 "malformed JSON at byte N:
// parsing time ..." that named no field: it is a *ValidationError on the
// field's path now, as a value of the wrong type is.
func TestValueItsTypeRefusesNamesTheField(t *testing.T) {
	trainer := `"trainer":{"kind":"builtin","builtin":{"model":{"hidden":[16]},"dataset":{"seed":1,"samples":1000,"features":8,"classes":3,"partitions":8},"epochs":2,"batch_size":32,"learning_rate":0.1}}`
	for _, deadline := range []string{`"not a time"`, `"2026-12-02"`, `"2026-13-02T06:00:00Z"`, `"1764655200"`} {
		_, err := DecodeSpec([]byte(`{"name":"d",` + trainer + `,"deadline":` + deadline + `}`))
		wantField(t, err, "deadline", "RFC 3339")
	}
	// Nested and in a sweep-like wrapper: the path is the value's.
	var v struct {
		Template Spec   `json:"template"`
		Jobs     []Spec `json:"jobs"`
	}
	err := DecodeStrict([]byte(`{"template":{"name":"d"},"jobs":[{"name":"a"},{"name":"b","deadline":"tomorrow"}]}`), &v)
	wantField(t, err, "jobs[1].deadline", "RFC 3339")
	// Malformed JSON stays a *DecodeError.
	var de *DecodeError
	if _, err := DecodeSpec([]byte(`{"name":"d","deadline":"2026-12-02T06:00:00Z"`)); !errors.As(err, &de) {
		t.Errorf("truncated body: %T %v, want a *DecodeError", err, err)
	}
}

// Label values, gpu.model and exec.workdir are "printable characters", but
// only C0 and DEL were refused: a C1 control (U+0085 NEL, U+009B, CSI to
// some terminals) was accepted. C1 is refused too now.
func TestC1ControlsAreNotPrintable(t *testing.T) {
	for _, c := range []string{"\u0085", "\u009b", "\u0080", "\u009f", "\x1b", "\x7f"} {
		s := validSpec()
		s.Labels = map[string]string{"k": "a" + c + "b"}
		wantField(t, s.Validate(), "labels.k", "printable")
		s = validSpec()
		s.GPU = &GPUConstraint{Model: "A100" + c}
		wantField(t, s.Validate(), "gpu.model", "printable")
	}
	s := validSpec()
	s.Labels = map[string]string{"k": "café 🚀 ü"}
	if err := s.Validate(); err != nil {
		t.Errorf("printable non-ASCII label value refused: %v", err)
	}
}
