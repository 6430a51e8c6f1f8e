// Package loopback runs a ring of real processes on this machine, for the
// collective's multi-process tests and for `edl bench allreduce`: a parent
// starts N copies of a program that calls Serve, learns their addresses,
// hands each a Task (its rank and the peer list) and collects their Reports.
// It also runs the same all-reduce with torch.distributed (gloo) when a
// Python with torch is present, as the figure to compare against.
//
// The parent and its children speak JSON lines over the children's stdin and
// stdout. It must not be used by the elastic worker itself: membership there
// comes from Redis, not from a parent process.
package loopback
