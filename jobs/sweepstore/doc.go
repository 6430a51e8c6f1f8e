// Package sweepstore keeps hyperparameter sweeps (jobs/sweep) in Redis the
// way jobs/jobstore keeps jobs: one hash per sweep written by
// compare-and-set on its version in a Lua script, a per-tenant index, an
// index of live sweeps for the controller, an event stream per sweep and
// Idempotency-Key records, and the shared Follower that wakes the API's
// sweep event streams. A sweep's trials are ordinary jobs in the job
// store, labelled with the sweep's ID; this package stores none of them.
//
// It must not decide anything about a sweep (that is sweep.Decide) and
// imports no HTTP or planner code.
package sweepstore
