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

// Next waits for a generation numbered above after, or the job's end
// (done true). Redis errors are retried until ctx ends.
func (w *Watcher) Next(ctx context.Context, after int64) (g *Generation, done bool, err error) {
	t := time.NewTicker(w.poll)
	defer t.Stop()
	for {
		g, err := w.c.ReadGen(ctx)
		if err == nil && g != nil && g.Number > after {
			return g, false, nil
		}
		if d, derr := w.c.Done(ctx); derr == nil && d {
			return nil, true, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-w.notify:
		case <-t.C:
		}
	}
}
