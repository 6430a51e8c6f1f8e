// Package local is the embedded cluster of `edl dev`: it runs `edl worker`
// processes on this machine, one per worker, with GPUs from NVML when there
// are any (one set of GPU IDs per worker, exported as CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES) and otherwise a fixed number of CPU slots.
//
// It mirrors the Nomad semantics the planner relies on: scale-in stops the
// highest indexes with SIGTERM and SIGKILL after a grace period; a worker
// that exits 0 is complete and not replaced until the next Scale; a worker
// that fails is restarted at the same index. It must not decide how many
// workers a job gets (that is the planner's) nor speak the worker protocol.
package local
