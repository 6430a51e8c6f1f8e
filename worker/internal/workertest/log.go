package workertest

import (
	"log/slog"
	"testing"
)

type testWriter struct{ t testing.TB }

func TestWriter(t testing.TB) testWriter { return testWriter{t} }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func TestLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
