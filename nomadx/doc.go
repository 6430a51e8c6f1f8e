// Package nomadx runs edl jobs on a Nomad cluster: it owns the Nomad job
// template (a batch job, group "workers", task "worker" running
// `edl worker`, with an nvidia/gpu device block and constraints for GPU
// jobs), registers, scales, stops and deregisters those jobs through the
// official nomad/api client, and reads the cluster's GPU capacity from nodes
// and live allocations.
//
// *Cluster implements the planner's Cluster interface without importing the
// planner. Nomad errors are retried here (5xx, time-outs, transport errors,
// with bounded backoff and jitter) or returned as *Error carrying Nomad's
// status and text, so callers branch with errors.As and never read Nomad's
// error strings. This is the one package that may look at Nomad's error
// texts.
//
// It must not decide how many workers a job gets (the planner does), talk to
// Redis, or read flags and environment (cmd/edl builds its Config).
// nomadtest is the fake Nomad HTTP API its tests run against.
package nomadx
