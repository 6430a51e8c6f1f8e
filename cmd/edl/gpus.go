package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/edl-nomad/edl/internal/gpustat"
)

func init() {
	register(command{
		name:    "gpus",
		summary: "the NVML read-out of this machine's GPUs, as the worker reports it (one JSON line per GPU)",
		run:     runGPUs,
	})
}

// errNoGPU: NVML is there but names no GPU.
var errNoGPU = errors.New("gpus: NVML found no GPU")

// runGPUs is `edl gpus`: gpustat.Read, the worker's own NVML reading, of
// the GPUs given (--gpus), else those NVIDIA_VISIBLE_DEVICES or
// CUDA_VISIBLE_DEVICES name, else every GPU NVML sees. Without NVML (no
// NVIDIA driver) it says so and exits 1.
func runGPUs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gpus", "Prints one JSON line per GPU: uuid, utilization_ratio, memory_used_bytes, memory_total_bytes,\npower_watts (the worker's gpustat reading through NVML, what /metrics shows).", stderr)
	only := fs.String("gpus", "", "comma-separated GPU indexes or UUIDs (default: the visible GPUs, else all)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids := gpustat.VisibleGPUs(func(k string) string {
		if *only != "" {
			if k == "NVIDIA_VISIBLE_DEVICES" {
				return *only
			}
			return ""
		}
		return os.Getenv(k)
	})
	if len(ids) == 0 {
		n, err := nvmlCount()
		if err != nil {
			return err
		}
		for i := range n {
			ids = append(ids, strconv.Itoa(i))
		}
	}
	if len(ids) == 0 {
		return errNoGPU
	}
	stats, err := gpustat.Read(ids)
	if err != nil {
		return fmt.Errorf("gpus: %w", err)
	}
	enc := json.NewEncoder(stdout)
	for _, st := range stats {
		if err := enc.Encode(st); err != nil {
			return err
		}
	}
	return nil
}

// nvmlCount is how many GPUs NVML sees.
func nvmlCount() (int, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return 0, fmt.Errorf("gpus: %w", gpustat.ErrNoNVML)
		}
		return 0, fmt.Errorf("gpus: nvml init: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("gpus: nvml device count: %s", nvml.ErrorString(ret))
	}
	return n, nil
}
