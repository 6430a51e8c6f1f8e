package cli

import (
	"io"
	"log/slog"
	"strings"
)

// LogLevel is a flag.Value for --log-level.
type LogLevel struct{ slog.Level }

func (l *LogLevel) String() string { return strings.ToLower(l.Level.String()) }

// Set parses debug, info, warn or error.
func (l *LogLevel) Set(s string) error { return l.UnmarshalText([]byte(s)) }

// NewLogger builds the process's one logger; components add component=... to it.
func NewLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
