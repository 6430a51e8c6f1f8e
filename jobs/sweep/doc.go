// Package sweep is a hyperparameter sweep as a domain: its spec and
// validation, the seeded sampling of each trial's parameters, their
// application to the template job spec, asynchronous successive halving
// (ASHA) as a pure decision over the trials' rung results, and the
// reallocation of a sweep's workers to its best surviving trials.
//
// It does no I/O: the sweep store (jobs/sweepstore) keeps sweeps in Redis
// and the controller (planner/sweeploop) reads trials' jobs and metrics,
// calls Decide and applies its Plan.
//
// A sweep's states:
//
//	running ──> succeeded   (every trial ended)
//	   │
//	   └──> cancelling ──> cancelled   (DELETE; every trial's job cancelled)
//
// A trial's states:
//
//	pending ──> running ──> completed   (reached scheduler.max, or its job succeeded)
//	                │──> cut            (ASHA: below its rung's cutoff; its job cancelled)
//	                │──> failed         (its job failed)
//	                └──> cancelled      (its job was cancelled by someone else, or the sweep was)
package sweep
