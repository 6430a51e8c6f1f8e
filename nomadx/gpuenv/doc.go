// Package gpuenv hands the GPUs Nomad allocated to a worker to CUDA.
//
// Nomad's NVIDIA device plugin tells a task its GPUs in
// NVIDIA_VISIBLE_DEVICES (GPU UUIDs). The NVIDIA container runtime reads
// it under the docker driver, but under exec and raw_exec nothing does,
// and CUDA honours only CUDA_VISIBLE_DEVICES: a trainer would see every GPU
// of the node and collide with its neighbours. The worker (and an exec-mode
// program it starts) should therefore get CUDA_VISIBLE_DEVICES derived
// from NVIDIA_VISIBLE_DEVICES when it is not set. CUDA accepts the UUIDs
// (GPU-..., MIG-...) as well as indexes, and UUIDs stay right inside a
// container that renumbers the devices.
//
// The package is pure (no Nomad client, no process environment of its
// own): callers pass the environment in.
package gpuenv
