// Package redisproc runs a redis-server as a child process on a free
// loopback port, for `edl dev` and the benchmarks that start their own Redis.
//
// It owns only the child's life: start, readiness, stop. It must not hold
// edl data semantics; callers connect with go-redis themselves.
package redisproc
