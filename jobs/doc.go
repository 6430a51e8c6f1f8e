// Package jobs is edl's domain: the job spec and its validation, the job
// state machine, tenants and quotas, the job and event types, and the small
// cluster types (capacity, workers) every part speaks.
//
// It imports nothing of edl's and no HTTP, Nomad, Redis or worker code; api,
// planner, nomadx, local and worker point at it. The Redis job store is
// package jobs/jobstore, so that the pure planner (and planner/sim) can use
// these types without linking a Redis client.
package jobs
