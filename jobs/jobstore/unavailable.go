package jobstore

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Unavailable reports whether err means the store could not be reached or
// cannot serve for now (Redis down, restarting, loading its append-only file,
// out of connections): a condition a client should retry later, never a
// fault of the request. The API answers it 503 with Retry-After. This is the
// one place that knows what go-redis's connection errors look like.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted), errors.Is(err, redis.ErrClosed),
		redis.IsLoadingError(err), redis.IsMasterDownError(err), redis.IsMaxClientsError(err),
		redis.IsReadOnlyError(err), redis.IsTryAgainError(err):
		return true
	}
	return false
}
