package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/redis/go-redis/v9"
)

// logLevel is a flag.Value for --log-level.
type logLevel = cli.LogLevel

// newLogger is the command's logger. go-redis's own messages (a pool that
// cannot dial, say) go through it too, as warnings of component=redis:
// they were plain lines on stderr, outside --log-json's format.
func newLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	l := cli.NewLogger(w, level, json)
	redis.SetLogger(redisLog{l.With("component", "redis")})
	return l
}

// redisLog is go-redis's logger on slog.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	r.l.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
