package pubsub

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Each calls fn with the payload of every message ps receives until ctx
// ends or ps is closed, then closes ps. It blocks: run it in a goroutine.
func Each(ctx context.Context, ps *redis.PubSub, fn func(payload string)) {
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			fn(m.Payload)
		}
	}
}
