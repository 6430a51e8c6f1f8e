package gpustat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
)

// ErrNoNVML means the NVIDIA management library is not on this machine.
var ErrNoNVML = errors.New("no NVML: libnvidia-ml not found")

// VisibleGPUs is the GPUs the worker was given, from NVIDIA_VISIBLE_DEVICES
// (Nomad's device plugin, the local cluster), else CUDA_VISIBLE_DEVICES:
// UUIDs ("GPU-...") or indexes; none for "", "void", "none" or "all" (which
// names no device in particular).
func VisibleGPUs(getenv func(string) string) []string {
	v := getenv("NVIDIA_VISIBLE_DEVICES")
	if v == "" {
		v = getenv("CUDA_VISIBLE_DEVICES")
	}
	switch strings.TrimSpace(v) {
	case "", "void", "none", "all", "NoDevFiles":
		return nil
	}
	var out []string
	for _, id := range strings.Split(v, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// Read samples the GPUs named by ids (UUIDs or indexes) once.
func Read(ids []string) ([]jobs.GPUStat, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, ErrNoNVML
		}
		return nil, fmt.Errorf("nvml init: %s", nvml.ErrorString(ret))
	}
	defer nvml.Shutdown()
	out := make([]jobs.GPUStat, 0, len(ids))
	for _, id := range ids {
		var d nvml.Device
		var ret nvml.Return
		if i, err := strconv.Atoi(id); err == nil {
			d, ret = nvml.DeviceGetHandleByIndex(i)
		} else {
			d, ret = nvml.DeviceGetHandleByUUID(id)
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %s: %s", id, nvml.ErrorString(ret))
		}
		st := jobs.GPUStat{UUID: id}
		if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
			st.UUID = u
		}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			st.UtilizationRatio = float64(u.Gpu) / 100
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			st.MemoryUsedBytes, st.MemoryTotalBytes = m.Used, m.Total
		}
		if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			st.PowerWatts = float64(mw) / 1000
		}
		out = append(out, st)
	}
	return out, nil
}

// Store is where reports go (jobstore.Store).
type Store interface {
	SetWorkerGPUStats(ctx context.Context, jobID string, st jobs.WorkerGPUStats) error
}

// Report samples ids every interval and stores the result until ctx ends.
// It returns at once when the worker has no GPU, and after the first
// attempt when there is no NVML.
func Report(ctx context.Context, store Store, jobID, worker string, ids []string, every time.Duration, log *slog.Logger) {
	if len(ids) == 0 {
		return
	}
	_ = periodic.Poll(ctx, every, func() bool {
		stats, err := Read(ids)
		switch {
		case errors.Is(err, ErrNoNVML):
			log.Info("no NVML: GPU use is not reported", "gpus", ids)
			return false
		case err != nil:
			log.Warn("read GPU use", "err", err)
		default:
			if err := store.SetWorkerGPUStats(ctx, jobID, jobs.WorkerGPUStats{Worker: worker, GPUs: stats}); err != nil && ctx.Err() == nil {
				log.Debug("report GPU use", "err", err)
			}
		}
		return true
	})
}
