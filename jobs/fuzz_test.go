package jobs

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodeSpec: no input may panic the decoder and validator, every
// failure is one of the two client-error types (the API maps them to 400 and
// 422, never 5xx), and an accepted spec round-trips unchanged.
func FuzzDecodeSpec(f *testing.F) {
	f.Add(exampleSpecJSON(f))
	f.Add([]byte(`{"name":"a","workers":{"min":1,"max":1},"trainer":{"kind":"exec","exec":{"command":["python3","t.py"],"env":{"A":"1"}}},"checkpoint":{"keep":1}}`))
	f.Add([]byte(`{"name":"a","gpu":{"model":"A100"},"gpus_per_worker":1,"labels":{"k":"v"},"callback_url":"http://x"}`))
	f.Add([]byte(`{"workers":{"min":-1,"max":1e99}}`))
	f.Add([]byte(`[1,2`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSpec(data)
		if err != nil {
			var de *DecodeError
			var ve *ValidationError
			if !errors.As(err, &de) && !errors.As(err, &ve) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if ve != nil && len(ve.Fields) == 0 {
				t.Fatal("validation error without fields")
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted spec does not validate: %v", err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := DecodeSpec(b)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		if !reflect.DeepEqual(normalize(s), normalize(s2)) {
			t.Fatalf("round trip changed the spec:\n%+v\n%+v", s, s2)
		}
	})
}

// normalize maps empty maps and slices to nil, which JSON does not keep apart.
func normalize(s Spec) Spec {
	s = s.Clone()
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	if s.Trainer.Builtin != nil && len(s.Trainer.Builtin.Model.Hidden) == 0 {
		s.Trainer.Builtin.Model.Hidden = nil
	}
	if s.Trainer.Exec != nil && len(s.Trainer.Exec.Env) == 0 {
		s.Trainer.Exec.Env = nil
	}
	return s
}

// FuzzApplyMergePatch: no patch may panic; failures are client errors; an
// accepted patch changes nothing but workers and priority, and stays valid.
func FuzzApplyMergePatch(f *testing.F) {
	f.Add([]byte(`{"spec":{"workers":{"min":2,"max":3},"priority":"opportunistic"}}`))
	f.Add([]byte(`{}`))
	base, err := DecodeSpec(exampleSpecJSON(f))
	if err != nil {
		f.Fatal(err)
	}
	job := Job{ID: "j-1", State: Running, Spec: base}
	f.Fuzz(func(t *testing.T, patch []byte) {
		got, err := ApplyMergePatch(job, patch)
		if err != nil {
			var de *DecodeError
			var ve *ValidationError
			if !errors.As(err, &de) && !errors.As(err, &ve) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("patched spec invalid: %v", err)
		}
		a, b := normalize(got), normalize(base)
		a.Workers, a.Priority = b.Workers, b.Priority
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("patch changed more than workers and priority:\n%+v\n%+v", got, base)
		}
	})
}
