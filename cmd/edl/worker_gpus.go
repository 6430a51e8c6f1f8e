package main

import (
	"os"

	"github.com/edl-nomad/edl/nomadx/gpuenv"
)

// handGPUsToCUDA sets CUDA_VISIBLE_DEVICES from NVIDIA_VISIBLE_DEVICES
// (what Nomad's NVIDIA device plugin sets) when it is unset, so that the
// built-in trainer and an exec-mode program, which inherit the worker's
// environment, see only the allocation's GPUs under the exec and raw_exec
// drivers. It returns the value set, or "" when nothing changed.
func handGPUsToCUDA() (string, bool) {
	v, ok := gpuenv.Derive(os.LookupEnv, nil)
	if !ok {
		return "", false
	}
	if err := os.Setenv(gpuenv.CUDA, v); err != nil {
		return "", false
	}
	return v, true
}
