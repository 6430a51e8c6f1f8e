// Package cpbench measures checkpoint throughput against the plain copy of
// the same bytes on the same disk or server, and the training stall a
// background checkpoint causes; `edl bench checkpoint` prints its Result.
//
// It owns only measuring; it must not assert anything about the figures.
package cpbench
