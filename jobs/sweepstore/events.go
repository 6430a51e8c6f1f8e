package sweepstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/redis/go-redis/v9"
)

// Events returns up to limit (default 100) events of the sweep after
// afterID ("" = from the start), oldest first.
func (s *Store) Events(ctx context.Context, id, afterID string, limit int) ([]sweep.Event, error) {
	start := "-"
	if afterID != "" {
		if !jobs.ValidEventID(afterID) {
			return nil, jobs.Invalid("after", "not an event id")
		}
		start = "(" + afterID
	}
	if limit <= 0 {
		limit = 100
	}
	msgs, err := s.rdb.XRangeN(ctx, s.eventsKey(id), start, "+", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("events of sweep %s: %w", id, err)
	}
	return decode(msgs)
}

// WaitEvents is Events that blocks up to block for the first new event;
// no events and no error when block passes.
func (s *Store) WaitEvents(ctx context.Context, id, afterID string, limit int, block time.Duration) ([]sweep.Event, error) {
	start := "0-0"
	if afterID != "" {
		if !jobs.ValidEventID(afterID) {
			return nil, jobs.Invalid("after", "not an event id")
		}
		start = afterID
	}
	if limit <= 0 {
		limit = 100
	}
	block = max(block, time.Millisecond)
	res, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{s.eventsKey(id), start}, Count: int64(limit), Block: block}).Result()
	if errors.Is(err, redis.Nil) || (err == nil && len(res) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("follow events of sweep %s: %w", id, err)
	}
	return decode(res[0].Messages)
}

func decode(msgs []redis.XMessage) ([]sweep.Event, error) {
	out := make([]sweep.Event, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["e"].(string)
		var ev sweep.Event
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			return nil, fmt.Errorf("decode sweep event %s: %w", m.ID, err)
		}
		ev.ID = m.ID
		out = append(out, ev)
	}
	return out, nil
}
