package core

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// committer sends a worker's data cursor and debug records to Redis off the
// step loop. Only the newest cursor matters (commits move forward), so
// cursors waiting behind a slow or absent Redis are merged; debug records
// are all kept. Flush waits until everything queued has landed.
type committer struct {
	pipe *datapipe.Pipe
	log  *slog.Logger

	mu      sync.Mutex
	pending *datapipe.Commit
	debug   []datapipe.DebugRecord
	busy    bool
	idle    *sync.Cond
	kick    chan struct{}

	seenGen atomic.Int64 // newest generation number Redis reported

	// life ends when run's context does: sendNow gives up then.
	life context.Context
	end  context.CancelFunc
}

func newCommitter(pipe *datapipe.Pipe, log *slog.Logger) *committer {
	c := &committer{pipe: pipe, log: log, kick: make(chan struct{}, 1)}
	c.idle = sync.NewCond(&c.mu)
	c.life, c.end = context.WithCancel(context.Background())
	return c
}

// add queues a cursor (nil: none) and debug records.
func (c *committer) add(cm *datapipe.Commit, debug ...datapipe.DebugRecord) {
	c.mu.Lock()
	if cm != nil {
		if c.pending != nil && c.pending.Epoch != cm.Epoch {
			// Keep the older epoch's cursor: send it first, synchronously in run.
			c.debug = append(c.debug, debug...)
			old := *c.pending
			c.pending = cm
			c.mu.Unlock()
			c.sendNow(old)
			poke(c.kick)
			return
		}
		c.pending = cm
	}
	c.debug = append(c.debug, debug...)
	c.mu.Unlock()
	poke(c.kick)
}

// sendNow lands cm before anything queued after it, retrying until it
// lands, is refused, or the committer's life ends.
func (c *committer) sendNow(cm datapipe.Commit) {
	_, _ = backoff.Retry(c.life, func() (struct{}, error) {
		_, err := c.pipe.Commit(c.life, cm, nil)
		if errors.Is(err, datapipe.ErrFenced) || errors.Is(err, datapipe.ErrNotOwner) {
			return struct{}{}, nil // refused for good: nothing to send
		}
		return struct{}{}, err
	}, backoff.WithBackOff(newBackOff()), backoff.WithMaxElapsedTime(0))
}

// Run sends queued work until ctx ends, retrying with backoff. It is not
// a plain retry: what failed is merged with what was queued meanwhile.
func (c *committer) Run(ctx context.Context) {
	context.AfterFunc(ctx, c.end)
	b := newBackOff()
	for {
		c.mu.Lock()
		cm, debug := c.pending, c.debug
		c.pending, c.debug = nil, nil
		c.busy = cm != nil || len(debug) > 0
		if !c.busy {
			c.idle.Broadcast()
		}
		c.mu.Unlock()
		if cm == nil && len(debug) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
			}
			continue
		}
		send := datapipe.Commit{Part: -1}
		if cm != nil {
			send = *cm
		}
		gen, err := c.pipe.Commit(ctx, send, debug)
		switch {
		case err == nil:
			b.Reset()
			if gen > c.seenGen.Load() {
				c.seenGen.Store(gen)
			}
		case errors.Is(err, datapipe.ErrFenced), errors.Is(err, datapipe.ErrNotOwner):
			c.log.Debug("commit dropped", "err", err)
		default:
			if ctx.Err() != nil {
				return
			}
			wait := b.NextBackOff()
			c.log.Warn("commit failed, retrying", "err", err, "backoff", wait)
			c.mu.Lock()
			if c.pending == nil || (cm != nil && c.pending.Epoch == cm.Epoch && c.pending.Step < cm.Step) {
				c.pending = cm
			}
			c.debug = append(debug, c.debug...)
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// Flush waits until everything queued so far has been sent (or dropped).
func (c *committer) Flush(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		c.mu.Lock()
		for c.busy || c.pending != nil || len(c.debug) > 0 {
			c.idle.Wait()
		}
		c.mu.Unlock()
		close(done)
	}()
	poke(c.kick)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
