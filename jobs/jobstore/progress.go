package jobstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/internal/records"
	"github.com/redis/go-redis/v9"
)

// Progress history defaults: a point a second at most, about 4000 points
// (an hour of steady reports; longer with pauses) per job.
const (
	defaultProgressEvery  = time.Second
	defaultProgressMaxLen = 4000
)

func (s *Store) progressKey(id string) string { return s.cfg.Prefix + "{" + id + "}:progress" }

// progressScript appends a point unless the last one is younger than the
// interval, so that reports a few times a second become one point a
// second; a point that changes the world size or the epoch is always kept
// (resizes show where they happened). Time is Redis's own, as the IDs are.
// KEYS: progress stream. ARGV: maxlen, interval ms, force ("1"), point JSON.
var progressScript = redis.NewScript(`
if ARGV[3] ~= '1' then
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if last[1] then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local ms = tonumber(string.match(last[1][1], '^(%d+)'))
    if now - ms < tonumber(ARGV[2]) then return false end
  end
end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'p', ARGV[4])
`)

// recordProgress adds j's progress to its history; prev is the progress it
// replaced. A failure is returned but leaves the job as written.
func (s *Store) recordProgress(ctx context.Context, j jobs.Job, prev jobs.Progress) error {
	p := j.Progress
	pt := jobs.ProgressPoint{Time: j.UpdatedAt, Epoch: p.Epoch, Step: p.Step, Samples: p.Samples, Loss: p.Loss,
		SamplesPerS: p.SamplesPerS, WorldSize: p.WorldSize, Generation: p.Generation,
		WorkersCurrent: j.Workers.Current, WorkersTarget: j.Workers.Target}
	b, err := json.Marshal(pt)
	if err != nil {
		return fmt.Errorf("encode progress point: %w", err)
	}
	force := "0"
	if p.WorldSize != prev.WorldSize || p.Epoch != prev.Epoch || p.Generation != prev.Generation {
		force = "1"
	}
	err = progressScript.Run(ctx, s.rdb, []string{s.progressKey(j.ID)}, s.cfg.ProgressMaxLen,
		s.cfg.ProgressEvery.Milliseconds(), force, b).Err()
	if err != nil && err != redis.Nil {
		return fmt.Errorf("record progress of %s: %w", j.ID, err)
	}
	return nil
}

// ProgressHistory returns up to limit points of the job after since (a
// point ID, exclusive; "" = from the oldest kept), oldest first.
func (s *Store) ProgressHistory(ctx context.Context, id, since string, limit int) ([]jobs.ProgressPoint, error) {
	if !records.ValidID(id) {
		return nil, jobs.ErrNotFound
	}
	start := "-"
	if since != "" {
		if !jobs.ValidEventID(since) {
			return nil, jobs.Invalid("since", "not a progress point ID")
		}
		if since == records.MaxEventID {
			return []jobs.ProgressPoint{}, nil // nothing comes after it
		}
		start = "(" + since
	}
	if limit <= 0 || limit > jobs.MaxProgressLimit {
		limit = jobs.MaxProgressLimit
	}
	msgs, err := s.rdb.XRangeN(ctx, s.progressKey(id), start, "+", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("progress of %s: %w", id, err)
	}
	out := make([]jobs.ProgressPoint, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["p"].(string)
		var pt jobs.ProgressPoint
		if err := json.Unmarshal([]byte(raw), &pt); err != nil {
			return nil, fmt.Errorf("decode progress point %s: %w", m.ID, err)
		}
		pt.ID = m.ID
		out = append(out, pt)
	}
	return out, nil
}
