// Package loop is the service side of edl's planner: the Redis lease that
// makes one `edl serve` replica active, the rounds, and the completion
// callbacks. A round reads (read.go: the job store's changes, the cluster,
// the loop's memory), decides (plan.go: decideRound, pure, the whole plan
// including settling, cancelling, teardown, callbacks and drains) and
// applies (apply.go: Apply, fenced and idempotent; after an error the next
// round reads and decides again). Package planner stays the pure policy;
// the interfaces the loop uses are declared here (ports.go).
package loop
