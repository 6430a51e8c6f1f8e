package main

import (
	"io"
	"log/slog"
	"strings"
)

// logLevel is a flag.Value for --log-level.
type logLevel struct{ slog.Level }

func (l *logLevel) String() string { return strings.ToLower(l.Level.String()) }

func (l *logLevel) Set(s string) error { return l.UnmarshalText([]byte(s)) }

// newLogger builds the process's one logger; components add component=... to it.
func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
