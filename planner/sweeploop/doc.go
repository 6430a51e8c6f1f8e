// Package sweeploop is the sweep controller: a loop in the planner's
// process that, while this replica holds the planner's lease, reads every
// live sweep, its trials' jobs and their metric logs, calls sweep.Decide
// and applies the plan: it creates trial jobs (Idempotency-Key
// "sweep:<id>:<trial>", so a retry or a successor never starts one twice),
// cancels cut trials' jobs, pins survivors' jobs to the sizes Decide gives
// them (the POST /scale pin, which the planner places as a gang at exactly
// that size), and writes the sweep back by compare-and-set.
//
// Everything it needs is in Redis: a planner that takes over starts with
// an empty cache and carries on from the sweeps and jobs as stored. It
// must not decide (that is jobs/sweep) and touches no planner internals.
package sweeploop
