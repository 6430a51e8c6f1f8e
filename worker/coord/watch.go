package coord

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/internal/pubsub"
)

// Watcher wakes a worker when a generation is announced or the job is done.
// Pub/sub is the fast path; it polls as well, since messages are lost while
// Redis is away.
type Watcher struct {
	c      *Client
	notify chan struct{}
	poll   time.Duration
	latest atomic.Int64 // newest generation number announced
}

// Watch subscribes to the job's channel until ctx ends.
func (c *Client) Watch(ctx context.Context, poll time.Duration) *Watcher {
	w := &Watcher{c: c, notify: make(chan struct{}, 1), poll: poll}
	ps := c.rdb.Subscribe(ctx, c.keys.Channel())
	go pubsub.Each(ctx, ps, func(payload string) {
		if n, ok := strings.CutPrefix(payload, "gen:"); ok {
			if v, err := strconv.ParseInt(n, 10, 64); err == nil && v > w.latest.Load() {
				w.latest.Store(v)
			}
		}
		if strings.HasPrefix(payload, "gen:") || payload == "done" {
			w.Poke()
		}
	})
	return w
}

// Poke wakes whoever waits in Next.
func (w *Watcher) Poke() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Latest is the newest generation number announced on the channel (0: none
// seen); it may miss announcements made while Redis was away.
func (w *Watcher) Latest() int64 { return w.latest.Load() }

// Changed is signalled when a generation may have been announced.
func (w *Watcher) Changed() <-chan struct{} { return w.notify }

// GenAfter reads once whether a generation numbered above after is out
// (g) or, if not, whether the job is done; a Redis error reads as neither,
// for callers that poll again.
func (c *Client) GenAfter(ctx context.Context, after int64) (g *Generation, done bool) {
	if g, err := c.ReadGen(ctx); err == nil && g != nil && g.Number > after {
		return g, false
	}
	d, err := c.Done(ctx)
	return nil, err == nil && d
}

// Next waits for a generation numbered above after, or the job's end
// (done true). Redis errors are retried until ctx ends.
func (w *Watcher) Next(ctx context.Context, after int64) (g *Generation, done bool, err error) {
	t := time.NewTicker(w.poll)
	defer t.Stop()
	for {
		if g, done := w.c.GenAfter(ctx, after); g != nil || done {
			return g, done, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-w.notify:
		case <-t.C:
		}
	}
}
