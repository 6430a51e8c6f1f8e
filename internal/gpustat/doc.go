// Package gpustat reads, through NVML, the use of the GPUs a worker holds
// (utilisation, memory, power) and reports it to the job store, where the
// API's /metrics reads it. Without NVML (no NVIDIA driver) it reports
// nothing and says so once: the series are then absent, not zero.
package gpustat
