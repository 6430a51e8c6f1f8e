package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/edl-nomad/edl/worker/collective/loopback"
)

// collective-peer is internal: `edl bench allreduce` starts one per rank and
// drives it over stdin/stdout (see worker/collective/loopback).
func init() {
	register(command{
		name:    "collective-peer",
		summary: "(internal) one rank of a loopback all-reduce ring, driven by edl bench allreduce",
		hidden:  true,
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			fs := newFlagSet("collective-peer", "One rank of a loopback ring; speaks JSON lines on stdin/stdout.", stderr)
			level := logLevel{Level: slog.LevelWarn}
			fs.Var(&level, "log-level", "log level: debug, info, warn, error")
			if err := parseFlags(fs, args); err != nil {
				return err
			}
			return loopback.Serve(ctx, os.Stdin, stdout, newLogger(stderr, level.Level, false))
		},
	})
}
