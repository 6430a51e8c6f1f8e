package main

import (
	"os"
	"testing"
)

func TestHandGPUsToCUDA(t *testing.T) {
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "GPU-aa,GPU-bb")
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	if v, ok := handGPUsToCUDA(); !ok || v != "GPU-aa,GPU-bb" || os.Getenv("CUDA_VISIBLE_DEVICES") != "GPU-aa,GPU-bb" {
		t.Errorf("handGPUsToCUDA = %q %v, env %q", v, ok, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	// Set now: a second call leaves it.
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "GPU-cc")
	if _, ok := handGPUsToCUDA(); ok || os.Getenv("CUDA_VISIBLE_DEVICES") != "GPU-aa,GPU-bb" {
		t.Errorf("an explicit CUDA_VISIBLE_DEVICES was overwritten: %q", os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
}
