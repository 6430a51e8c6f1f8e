// Package cli holds what every `edl` command line shares: flag sets whose
// flags also read EDL_* variables, the usage error that exits 2, and the
// --log-level flag and logger. Only cmd/edl and the benchmarks (internal/bench)
// import it; it knows no command.
package cli
