package jobs

import "time"

// GPUStat is one GPU's use as NVML reports it to the worker holding it.
type GPUStat struct {
	UUID             string  `json:"uuid"`
	UtilizationRatio float64 `json:"utilization_ratio"` // 0..1, busy time of the last sample period
	MemoryUsedBytes  uint64  `json:"memory_used_bytes"`
	MemoryTotalBytes uint64  `json:"memory_total_bytes"`
	PowerWatts       float64 `json:"power_watts"`
}

// WorkerGPUStats is what one worker last reported about its GPUs.
type WorkerGPUStats struct {
	Worker string    `json:"worker"`
	Time   time.Time `json:"time"`
	GPUs   []GPUStat `json:"gpus"`
}
