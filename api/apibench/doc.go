// Package apibench measures the jobs API end to end: it serves the real API
// over a real Redis on a loopback port and drives it with keep-alive HTTP/1.1
// connections, closed loop (a fixed number of clients) and open loop (a
// fixed arrival rate, latency from each request's due time), reporting
// throughput, latency percentiles and CPU per request.
//
// It owns no data semantics; the caller provides the Redis (edl bench api
// starts its own redis-server) and prints the Result.
package apibench
