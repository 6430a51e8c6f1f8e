// Package jobstore keeps jobs, their event logs and progress histories in
// Redis: the Store (create, compare-and-set updates, listing, the planner's
// incremental reads and fenced writes), the shared event Follower, and
// Unavailable, which tells a Redis outage from a bad request.
//
// The types it stores are package jobs's; it is the only part of jobs that
// links go-redis.
package jobstore
