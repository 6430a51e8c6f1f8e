package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/internal/gpustat"
)

// TestGPUs: with NVML every line is a GPU with its UUID; without it (CI,
// this project's machine) the error says there is no NVML.
func TestGPUs(t *testing.T) {
	var out, errb bytes.Buffer
	err := runGPUs(t.Context(), nil, &out, &errb)
	if err != nil {
		if !errors.Is(err, gpustat.ErrNoNVML) && !errors.Is(err, errNoGPU) {
			t.Fatalf("gpus: %v, want a reading or ErrNoNVML", err)
		}
		if out.Len() != 0 {
			t.Errorf("output without NVML: %q", out.String())
		}
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var st struct{ UUID string }
		if json.Unmarshal([]byte(l), &st) != nil || st.UUID == "" {
			t.Errorf("line %q is not a GPU reading", l)
		}
	}
}
