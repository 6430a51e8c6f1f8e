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
// (resizes show where they happened), and a job's last point, written when
// it ends, is kept unless the newest point has its step already. Time is
// Redis's own, as the IDs are (TIME: a worker's ACL user must allow it,
// see planner/loop's workerRules).
// KEYS: progress stream. ARGV: maxlen, interval ms, keep ("1": always;
// "end": unless the newest point has this step; else thinned), point
// JSON, step.
var progressScript = redis.NewScript(`
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if last[1] then
  if ARGV[3] == 'end' then
    local f = last[1][2]
    for i = 1, #f - 1, 2 do
      if f[i] == 's' and f[i + 1] == ARGV[5] then return false end
    end
  elseif ARGV[3] ~= '1' then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local ms = tonumber(string.match(last[1][1], '^(%d+)'))
    if now - ms < tonumber(ARGV[2]) then return false end
  end
end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'p', ARGV[4], 's', ARGV[5])
`)

// recordProgress adds j's progress to its history; prev is the progress it
// replaced. A failure is returned but leaves the job as written.
func (s *Store) recordProgress(ctx context.Context, j jobs.Job, prev jobs.Progress) error {
	p := j.Progress
	keep := "0"
	if p.WorldSize != prev.WorldSize || p.Epoch != prev.Epoch || p.Generation != prev.Generation {
		keep = "1"
	}
	return s.addProgressPoint(ctx, j, keep)
}

// recordFinalProgress closes the history of a job that has just ended
// with its last progress, so that the curve ends where the job did (the
// reports of its last second were thinned away, and a short job has no
// other point after its first). A job that never stepped gets none.
func (s *Store) recordFinalProgress(ctx context.Context, j jobs.Job) error {
	if j.Progress.Step <= 0 {
		return nil
	}
	return s.addProgressPoint(ctx, j, "end")
}

func (s *Store) addProgressPoint(ctx context.Context, j jobs.Job, keep string) error {
	p := j.Progress
	pt := jobs.ProgressPoint{Time: j.UpdatedAt, Epoch: p.Epoch, Step: p.Step, Samples: p.Samples, Loss: p.Loss,
		SamplesPerS: p.SamplesPerS, WorldSize: p.WorldSize, Generation: p.Generation,
		WorkersCurrent: j.Workers.Current, WorkersTarget: j.Workers.Target}
	b, err := json.Marshal(pt)
	if err != nil {
		return fmt.Errorf("encode progress point: %w", err)
	}
	err = progressScript.Run(ctx, s.rdb, []string{s.progressKey(j.ID)}, s.cfg.ProgressMaxLen,
		s.cfg.ProgressEvery.Milliseconds(), keep, b, p.Step).Err()
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
