// Package redisproc runs a redis-server as a child process on a free
// loopback port, for `edl dev` and the benchmarks that start their own Redis.
//
// It owns only the child's life: start, readiness, stop, and (Supervised)
// restart on the same port and data after a death, or a clear failure. It must not hold
// edl data semantics; callers connect with go-redis themselves.
package redisproc
