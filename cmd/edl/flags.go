package main

import (
	"flag"
	"io"

	"github.com/edl-nomad/edl/internal/cli"
)

// The command-line helpers live in internal/cli, shared with the
// benchmarks (internal/bench); these names keep cmd/edl's code short.

// usageError is a bad command line or a bad EDL_* value; it exits 2.
type usageError = cli.UsageError

func usageErrorf(format string, args ...any) error { return cli.Usagef(format, args...) }

func newFlagSet(name, summary string, stderr io.Writer) *flag.FlagSet {
	return cli.NewFlagSet(name, summary, stderr)
}

func envName(flagName string) string { return cli.EnvName(flagName) }

func parseFlags(fs *flag.FlagSet, args []string) error { return cli.ParseFlags(fs, args) }
