package jobs

import (
	"strings"
	"testing"
)

// An unknown nested field was named by its key alone ("zzz"); the 422
// names its whole path now, inside arrays and maps too.
func TestUnknownFieldNamedByPath(t *testing.T) {
	ex := string(exampleSpecJSON(t))
	tests := []struct{ name, body, field string }{
		{"top level", strings.Replace(ex, `"name": "mlp-synthetic",`, `"name": "mlp-synthetic", "zzz": 1,`, 1), "zzz"},
		{"nested", strings.Replace(ex, `"epochs": 6,`, `"epochs": 6, "zzz": 1,`, 1), "trainer.builtin.zzz"},
		{"deeper", strings.Replace(ex, `"hidden": [1024, 512]`, `"hidden": [1024, 512], "zzz": {"a": 1}`, 1), "trainer.builtin.model.zzz"},
		{"case-folded known key is not unknown", strings.Replace(ex, `"epochs": 6,`, `"epochs": 6, "Zzz": 1,`, 1), "trainer.builtin.Zzz"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.body == ex {
				t.Fatal("edit did not apply")
			}
			_, err := DecodeSpec([]byte(tc.body))
			wantField(t, err, tc.field, "unknown field")
		})
	}
	// A key that is known in one object and unknown in another is named
	// where it is unknown; objects inside arrays carry their index.
	type item struct {
		X int `json:"x"`
	}
	var v struct {
		Name  string `json:"name"`
		Items []item `json:"items"`
	}
	wantField(t, DecodeStrict([]byte(`{"items":[{"x":1},{"x":2,"name":3}],"name":"a"}`), &v), "items[1].name", "unknown field")
	var m struct {
		M map[string]item `json:"m"`
	}
	wantField(t, DecodeStrict([]byte(`{"m":{"k":{"x":1,"y":2}}}`), &m), "m.k.y", "unknown field")
}

// EDL_WORKER_INDEX (and every EDL_ name: the worker's own) in a spec's
// env was accepted and overrode the worker's value: refused by name now.
func TestEDLEnvReserved(t *testing.T) {
	cmd := []string{"/usr/bin/python3", "train.py"}
	for _, name := range []string{"EDL_WORKER_INDEX", "EDL_SOCKET", "EDL_LIVE_TIMEOUT_S", "EDL_REDIS", "EDL_ANYTHING"} {
		err := execSpec(ExecTrainer{Command: cmd, Env: map[string]string{name: "7", "OMP_NUM_THREADS": "1"}}).Validate()
		wantField(t, err, "trainer.exec.env."+name, "reserved")
	}
	if err := execSpec(ExecTrainer{Command: cmd, Env: map[string]string{"EDLX": "1", "MY_EDL_X": "1"}}).Validate(); err != nil {
		t.Fatalf("names that only contain EDL: %v", err)
	}
}

// trainer.exec.image goes into the docker driver's config, which Nomad
// interpolates with the task's environment: an image like
// "registry.internal/ml/x:${EDL_REDIS_PASSWORD}" was accepted (only spaces
// and control characters were refused) and put the workers' Redis login
// (or the operator's worker env, e.g. store keys) into a pull the
// registry logs. Strings Docker cannot pull ("--privileged", uppercase
// repositories, short digests) were accepted too and failed only when
// every worker's pull failed. The image must be a reference now.
func TestExecImageMustBeAReference(t *testing.T) {
	cmd := []string{"/usr/bin/python3", "train.py"}
	hex64 := strings.Repeat("0123456789abcdef", 4)
	for _, ok := range []string{
		"registry.internal/ml/t:1", "python:3.12-slim", "ubuntu", "localhost:5000/a/b_c/d--e:v1.2-rc_3",
		"ghcr.io/org/x@sha256:" + hex64, "registry.internal/ml/train:1.2@sha256:" + hex64,
		"[::1]:5000/x:1", "Registry.Internal:443/ml/x", "a.b/c__d/e.f",
	} {
		if err := execSpec(ExecTrainer{Command: cmd, Image: ok}).Validate(); err != nil {
			t.Errorf("image %q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"registry.internal/ml/x:${EDL_REDIS_PASSWORD}", "registry.internal/ml/${attr.unique.hostname}",
		"registry.internal/ml/x:$EDL_REDIS_PASSWORD", "--privileged", "-v/:/host", "registry.internal/ML/x",
		"x@sha256:0123", "a//b", "x:", ":tag", "x:-tag", "x y", "x\tz", "registry.internal/ml/x:1;rm",
		strings.Repeat("a", 256), "x:" + strings.Repeat("t", 129), "reg.io/" + strings.Repeat("a/", 300) + "b",
	} {
		t.Run("", func(t *testing.T) {
			err := execSpec(ExecTrainer{Command: cmd, Image: bad}).Validate()
			wantField(t, err, "trainer.exec.image", "")
		})
	}
}

// gpu.model is the value of a device constraint, which Nomad interpolates:
// "${device.model}" was accepted and matched every GPU on Nomad while the
// planner, comparing the text, matched none. Refused by name now.
func TestGPUModelNotInterpolated(t *testing.T) {
	s := validSpec()
	s.GPUsPerWorker = 1
	for _, model := range []string{"${device.model}", "H100 ${node.unique.name}"} {
		s.GPU = &GPUConstraint{Model: model}
		wantField(t, s.Validate(), "gpu.model", "interpolation")
	}
	s.GPU = &GPUConstraint{Model: "NVIDIA H100 80GB HBM3 ($5/h)"}
	if err := s.Validate(); err != nil {
		t.Fatalf("a plain model refused: %v", err)
	}
}

// NVIDIA_VISIBLE_DEVICES and NOMAD_* in a spec's env were accepted:
// NVIDIA_VISIBLE_DEVICES=all replaced the device plugin's list of the
// allocation's GPUs, from which the worker derives the program's
// CUDA_VISIBLE_DEVICES, so on raw_exec/exec the program saw every GPU of
// the host, other jobs' included; NOMAD_ALLOC_DIR and the like replaced
// Nomad's own. Refused by name now.
func TestNomadAndGPUEnvReserved(t *testing.T) {
	cmd := []string{"/usr/bin/python3", "train.py"}
	for _, name := range []string{"NVIDIA_VISIBLE_DEVICES", "NOMAD_ALLOC_DIR", "NOMAD_PORT_master", "NOMAD_TOKEN"} {
		err := execSpec(ExecTrainer{Command: cmd, Env: map[string]string{name: "all", "OMP_NUM_THREADS": "1"}}).Validate()
		wantField(t, err, "trainer.exec.env."+name, "reserved")
	}
	if err := execSpec(ExecTrainer{Command: cmd, Env: map[string]string{"NOMADX": "1", "MY_NOMAD_X": "1", "NVIDIA_DRIVER_CAPABILITIES": "compute"}}).Validate(); err != nil {
		t.Fatalf("names that only contain NOMAD or NVIDIA: %v", err)
	}
}
