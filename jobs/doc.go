// Package jobs is edl's domain: the job spec and its validation, the job
// state machine, tenants and quotas, the job store and event log (Redis),
// and the small cluster types (capacity, workers) every part speaks.
//
// It imports nothing of edl's and no HTTP, Nomad or worker code; api,
// planner, nomadx, local and worker point at it.
package jobs
