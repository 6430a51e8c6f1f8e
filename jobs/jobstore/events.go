package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/internal/pubsub"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/internal/records"
	"github.com/redis/go-redis/v9"
)

// appendScript adds an event only if the job exists.
// KEYS: job, events. ARGV: event JSON, maxlen.
var appendScript = redis.NewScript(appendSrc)

var appendFencedScript = redis.NewScript(fencePrelude + appendSrc)

const appendSrc = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[1])
`

// AppendEvent adds ev to the job's log (its ID assigned, its time set to now
// when zero) and returns it as stored. ErrNotFound if there is no such job.
func (s *Store) AppendEvent(ctx context.Context, id string, ev jobs.Event) (jobs.Event, error) {
	if !records.ValidID(id) {
		return jobs.Event{}, jobs.ErrNotFound
	}
	if ev.Time.IsZero() {
		ev.Time = s.cfg.Now().UTC()
	}
	ev.ID = ""
	b, err := json.Marshal(ev)
	if err != nil {
		return jobs.Event{}, fmt.Errorf("encode event: %w", err)
	}
	keys, args, script := []string{s.jobKey(id), s.eventsKey(id)}, []any{b, s.cfg.EventsMaxLen}, appendScript
	if s.fenceKey != "" {
		script, keys, args = appendFencedScript, append(keys, s.fenceKey), append(args, s.fence)
	}
	sid, err := script.Run(ctx, s.rdb, keys, args...).Text()
	if isFenced(err) {
		return jobs.Event{}, fmt.Errorf("append event to %s: %w", id, jobs.ErrFenced)
	}
	if errors.Is(err, redis.Nil) {
		return jobs.Event{}, jobs.ErrNotFound
	}
	if err != nil {
		return jobs.Event{}, fmt.Errorf("append event to %s: %w", id, err)
	}
	ev.ID = sid
	return ev, nil
}

// Events returns up to limit events of the job after afterID ("" = from the
// start), oldest first.
func (s *Store) Events(ctx context.Context, id, afterID string, limit int) ([]jobs.Event, error) {
	evs, err := records.Events(ctx, s.rdb, s.eventsKey(id), afterID, limit, setEventID)
	return evs, records.Wrap(err, "events of "+id)
}

// WaitEvents is Events that blocks up to block for the first new event, for
// streaming (SSE). It returns no events and no error when block passes.
// Each waiting caller holds one Redis connection while it blocks.
func (s *Store) WaitEvents(ctx context.Context, id, afterID string, limit int, block time.Duration) ([]jobs.Event, error) {
	evs, err := records.WaitEvents(ctx, s.rdb, s.eventsKey(id), afterID, limit, block, setEventID)
	return evs, records.Wrap(err, "follow events of "+id)
}

func setEventID(ev *jobs.Event, id string) { ev.ID = id }

// Notify wakes subscribers (the planner) about job id.
func (s *Store) Notify(ctx context.Context, id string) error {
	return s.rdb.Publish(ctx, s.notifyChannel(), id).Err()
}

// Subscribe returns job IDs as they are submitted, cancelled or respecified
// (Create, a move to cancelling, a change of workers or priority, Notify).
// It is a wake-up signal, not a log: when the reader lags, IDs are dropped,
// so a reader re-reads the store (ListActive) on each. The channel closes
// when ctx ends.
func (s *Store) Subscribe(ctx context.Context) <-chan string {
	ps := s.rdb.Subscribe(ctx, s.notifyChannel())
	// Wait for the subscription to be in place so that nothing published
	// after Subscribe returns is missed; on error go-redis keeps retrying.
	_, _ = ps.Receive(ctx)
	out := make(chan string, 64)
	go func() {
		defer close(out)
		pubsub.Each(ctx, ps, func(payload string) {
			select {
			case out <- payload:
			default:
			}
		})
	}()
	return out
}
