package main

import (
	"io"
	"log/slog"

	"github.com/edl-nomad/edl/internal/cli"
)

// logLevel is a flag.Value for --log-level.
type logLevel = cli.LogLevel

func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	return cli.NewLogger(w, level, json)
}
