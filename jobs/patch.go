package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// ApplyMergePatch applies an RFC 7396 JSON merge patch to a job's resource and
// returns the new spec. Only spec.workers.min, spec.workers.max and
// spec.priority may change; any other member is refused by name before any
// value is decoded or merged (a member that repeats the spec's current value
// exactly is allowed, as the no-op it is). Duplicate keys are refused. The
// result is validated like a submitted spec.
func ApplyMergePatch(j Job, patch []byte) (Spec, error) {
	if err := validJSON(patch); err != nil {
		return Spec{}, err
	}
	keys, doc, err := objectMembers(patch, "")
	if err != nil {
		return Spec{}, err
	}
	v := &ValidationError{}
	for _, k := range keys {
		if k != "spec" {
			v.add(k, "read-only: only spec.workers and spec.priority can be patched")
		}
	}
	if err := v.orNil(); err != nil {
		return Spec{}, err
	}
	raw, ok := doc["spec"]
	if !ok {
		return j.Spec, nil
	}
	if isNull(raw) {
		return Spec{}, Invalid("spec", "must be an object (a merge patch of the spec); the spec cannot be removed")
	}
	keys, members, err := objectMembers(raw, "spec")
	if err != nil {
		return Spec{}, err
	}
	next := j.Spec
	cur, err := currentMembers(j.Spec)
	if err != nil {
		return Spec{}, err
	}
	for _, k := range keys {
		val := members[k]
		switch k {
		case "workers":
			if err := patchWorkers(&next.Workers, val); err != nil {
				v.Fields = append(v.Fields, err.(*ValidationError).Fields...)
			}
		case "priority":
			if isNull(val) {
				next.Priority = ""
				continue
			}
			var p Priority
			if err := DecodeStrict(val, &p); err != nil {
				return Spec{}, prefixFields(renameBody(err, "priority"), "spec.")
			}
			next.Priority = p
		default:
			switch {
			case !specMembers[k]:
				v.add("spec."+k, "unknown field")
			case !sameValue(cur[k], val):
				v.add("spec."+k, "cannot be changed after submission")
			}
		}
	}
	if err := v.orNil(); err != nil {
		return Spec{}, err
	}
	next = next.WithDefaults()
	if err := next.Validate(); err != nil {
		return Spec{}, prefixFields(err, "spec.")
	}
	return next, nil
}

// validJSON refuses a body that is not well-formed JSON as a whole, so a
// syntax error anywhere is malformed JSON (400) whatever member it is in.
func validJSON(b []byte) error {
	if !json.Valid(b) {
		var v any
		return DecodeStrict(b, &v) // for the offset and message
	}
	return nil
}

// patchWorkers merges a patch of spec.workers: null removes both bounds
// (which validation then refuses), an object may name min and max.
func patchWorkers(w *WorkerRange, raw json.RawMessage) error {
	if isNull(raw) {
		*w = WorkerRange{}
		return nil
	}
	keys, members, err := objectMembers(raw, "spec.workers")
	if err != nil {
		if ve, ok := err.(*ValidationError); ok {
			return ve
		}
		return Invalid("spec.workers", err.Error())
	}
	v := &ValidationError{}
	for _, k := range keys {
		var dst *int
		switch k {
		case "min":
			dst = &w.Min
		case "max":
			dst = &w.Max
		default:
			v.add("spec.workers."+k, "unknown field")
			continue
		}
		if isNull(members[k]) {
			*dst = 0
			continue
		}
		if err := DecodeStrict(members[k], dst); err != nil {
			ve, ok := renameBody(err, k).(*ValidationError)
			if !ok {
				return Invalid("spec.workers."+k, err.Error())
			}
			v.Fields = append(v.Fields, prefixFields(ve, "spec.workers.").(*ValidationError).Fields...)
		}
	}
	if len(v.Fields) > 0 {
		return v
	}
	return nil
}

// renameBody names a whole-value decode error after the member it came from.
func renameBody(err error, field string) error {
	return renameFields(err, func(f string) string {
		if f == "(body)" {
			return field
		}
		return f
	})
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// specMembers are the JSON names of Spec's fields.
var specMembers = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(Spec{})
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}()

// currentMembers is the spec as the API shows it, member by member.
func currentMembers(s Spec) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// sameValue says whether a merge patch member leaves the current value as
// it is: null for an absent member, or the same JSON (compared compacted,
// so layout does not matter but member order does).
func sameValue(cur, patch json.RawMessage) bool {
	if isNull(patch) {
		return cur == nil || isNull(cur)
	}
	if cur == nil {
		return false
	}
	var a, b bytes.Buffer
	if json.Compact(&a, cur) != nil || json.Compact(&b, patch) != nil {
		return false
	}
	return bytes.Equal(a.Bytes(), b.Bytes())
}

func prefixFields(err error, prefix string) error {
	return renameFields(err, func(f string) string { return prefix + f })
}

// renameFields is err, when it is a *ValidationError, with every field
// named again by rename (a new error: err is left as it is); any other
// error is returned as it is.
func renameFields(err error, rename func(field string) string) error {
	ve, ok := err.(*ValidationError)
	if !ok {
		return err
	}
	out := &ValidationError{}
	for _, f := range ve.Fields {
		out.Fields = append(out.Fields, FieldError{Field: rename(f.Field), Reason: f.Reason})
	}
	return out
}

// Pin sets the size a tenant asked for with POST .../scale: n within the
// spec's [min, max], or 0 to hand the choice back to the planner. A
// deadline job is not pinned (its size is the planner's).
func (j *Job) Pin(n int) error {
	if n != 0 && j.Spec.HasDeadline() {
		// The planner sizes it (the least share that meets its deadline,
		// admitted beside the other deadline jobs) and would ignore a pin.
		return Invalid("workers", "a deadline job cannot be pinned: the planner picks the workers that meet its deadline (workers.max caps them); 0 unpins")
	}
	if n != 0 && (n < j.Spec.Workers.Min || n > j.Spec.Workers.Max) {
		return Invalid("workers", fmt.Sprintf("must be between workers.min (%d) and workers.max (%d), or 0 to unpin",
			j.Spec.Workers.Min, j.Spec.Workers.Max))
	}
	j.Workers.Pinned = n
	return nil
}
