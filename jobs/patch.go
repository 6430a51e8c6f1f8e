package jobs

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// ApplyMergePatch applies an RFC 7396 JSON merge patch to a job's resource and
// returns the new spec. Only spec.workers.min, spec.workers.max and
// spec.priority may change; any other member is refused by name. The result
// is validated like a submitted spec.
func ApplyMergePatch(j Job, patch []byte) (Spec, error) {
	var doc map[string]json.RawMessage
	if err := DecodeStrict(patch, &doc); err != nil {
		return Spec{}, err
	}
	if doc == nil {
		return Spec{}, Invalid("(body)", "must be a JSON object")
	}
	v := &ValidationError{}
	for k := range doc {
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
	cur, err := json.Marshal(j.Spec)
	if err != nil {
		return Spec{}, err
	}
	var target any
	if err := json.Unmarshal(cur, &target); err != nil {
		return Spec{}, err
	}
	var p any
	if err := json.Unmarshal(raw, &p); err != nil {
		return Spec{}, &DecodeError{Msg: err.Error()}
	}
	if _, isObj := p.(map[string]any); !isObj {
		return Spec{}, Invalid("spec", "must be an object (a merge patch of the spec)")
	}
	merged, err := json.Marshal(mergePatch(target, p))
	if err != nil {
		return Spec{}, err
	}
	var next Spec
	if err := DecodeStrict(merged, &next); err != nil {
		return Spec{}, prefixFields(err, "spec.")
	}
	next = next.WithDefaults()
	before, after := j.Spec.Clone(), next.Clone()
	before.Workers, after.Workers = WorkerRange{}, WorkerRange{}
	before.Priority, after.Priority = "", ""
	if !reflect.DeepEqual(before, after) {
		for _, f := range changedFields(before, after) {
			v.add("spec."+f, "cannot be changed after submission")
		}
		return Spec{}, v
	}
	if err := next.Validate(); err != nil {
		return Spec{}, prefixFields(err, "spec.")
	}
	return next, nil
}

// mergePatch is RFC 7396's MergePatch(Target, Patch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

// changedFields names the top-level spec members that differ.
func changedFields(a, b Spec) []string {
	var ma, mb map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	var out []string
	for _, k := range sortedKeys(mergeKeys(ma, mb)) {
		if !reflect.DeepEqual(ma[k], mb[k]) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		out = []string{"(spec)"}
	}
	return out
}

func mergeKeys(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func prefixFields(err error, prefix string) error {
	ve, ok := err.(*ValidationError)
	if !ok {
		return err
	}
	out := &ValidationError{}
	for _, f := range ve.Fields {
		out.Fields = append(out.Fields, FieldError{Field: prefix + f.Field, Reason: f.Reason})
	}
	return out
}

// Pin sets the size a tenant asked for with POST .../scale: n within the
// spec's [min, max], or 0 to hand the choice back to the planner.
func (j *Job) Pin(n int) error {
	if n != 0 && (n < j.Spec.Workers.Min || n > j.Spec.Workers.Max) {
		return Invalid("workers", fmt.Sprintf("must be between workers.min (%d) and workers.max (%d), or 0 to unpin",
			j.Spec.Workers.Min, j.Spec.Workers.Max))
	}
	j.Workers.Pinned = n
	return nil
}
