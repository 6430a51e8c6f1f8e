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
