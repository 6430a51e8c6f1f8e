// Package loop is the service side of edl's planner: the Redis lease that
// makes one `edl serve` replica active, the loop that snapshots the job
// store and the cluster, calls planner.Decide and applies its plan, and the
// completion callbacks. Package planner stays the pure policy.
package loop
