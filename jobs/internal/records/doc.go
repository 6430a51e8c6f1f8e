// Package records is what the Redis stores of jobs (jobs/jobstore) and
// sweeps (jobs/sweepstore) share: their record IDs, the reading of their
// event streams (a page after an ID, or a blocking wait for the next
// ones), the reply of their compare-and-set scripts and their
// Idempotency-Key records.
package records
