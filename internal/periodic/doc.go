// Package periodic is the one periodic loop of edl's background tasks
// (lease renewal, heartbeats, sweep rounds, GPU and speed reports, the
// benchmarks' probes): call a function every interval until the context
// ends or the function says stop; and Sleep, the one wait that a context
// cuts short (retry backoffs, watch gaps, polls).
package periodic
