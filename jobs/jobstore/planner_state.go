package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// fencePrelude starts a fenced script: the last key is the fence key and the
// last argument the fence the writer holds; both are popped before the
// script proper runs, which sees its usual KEYS and ARGV.
const fencePrelude = `
local fence = table.remove(ARGV)
local fkey = table.remove(KEYS)
if (redis.call('GET', fkey) or '0') ~= fence then return redis.error_reply('EDLFENCED fence ' .. fence .. ' is stale') end
`

func isFenced(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "EDLFENCED") }

// WithFence returns a store over the same Redis whose every write (Update,
// Transition, AppendEvent, ...) is refused with ErrFenced unless fenceKey
// still holds fence, checked in the write's own script. The planner writes
// through one while it holds the lease (planner/loop's Lease INCRs fenceKey
// on every takeover).
func (s *Store) WithFence(fenceKey string, fence int64) *Store {
	c := *s
	c.fenceKey, c.fence = fenceKey, fence
	return &c
}

// Fence is the fence this store presents with its writes (0: none).
func (s *Store) Fence() int64 { return s.fence }

// ChangedSince returns the live jobs written after change sequence seq (0:
// every live job recorded in the change index) and the newest sequence
// seen, to pass next time: an incremental view of ListActive. Jobs that
// became terminal meanwhile are not in it; they are in Finished until the
// planner has cleaned them up.
func (s *Store) ChangedSince(ctx context.Context, seq int64) ([]jobs.Job, int64, error) {
	entries, err := s.rdb.ZRangeByScoreWithScores(ctx, s.changesKey(), &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(seq, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, seq, fmt.Errorf("changed jobs: %w", err)
	}
	jobs, err := s.decodeEntries(ctx, entries)
	if err != nil {
		return nil, seq, err
	}
	next := seq
	for _, e := range entries {
		next = max(next, int64(e.Score))
	}
	out := jobs[:0]
	for _, j := range jobs {
		if !j.State.Terminal() {
			out = append(out, j)
		}
	}
	return out, next, nil
}

// ChangeSeq is the newest change sequence: what ChangedSince returns after
// a full ListActive read that starts after it.
func (s *Store) ChangeSeq(ctx context.Context) (int64, error) {
	n, err := s.rdb.Get(ctx, s.chgSeqKey()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("change sequence: %w", err)
	}
	return n, nil
}

// Finished returns the terminal jobs the planner has not cleaned up yet
// (Job.Planner.Finished unset), oldest first.
func (s *Store) Finished(ctx context.Context) ([]jobs.Job, error) {
	entries, err := s.rdb.ZRangeWithScores(ctx, s.finishedKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("finished jobs: %w", err)
	}
	return s.decodeEntries(ctx, entries)
}

func (s *Store) decodeEntries(ctx context.Context, entries []redis.Z) ([]jobs.Job, error) {
	raws, err := s.loadRaw(ctx, entries)
	if err != nil {
		return nil, err
	}
	out := make([]jobs.Job, 0, len(raws))
	for i, raw := range raws {
		if raw == nil {
			continue
		}
		var j jobs.Job
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("decode job %v: %w", entries[i].Member, err)
		}
		out = append(out, j)
	}
	return out, nil
}

// ServiceHistoryMax is how many succeeded jobs' service the store keeps
// for the planner's ranking (the newest ones).
const ServiceHistoryMax = 1000

// serviceOf is what a write of j adds to the service history if it is the
// write that takes j out of the finished queue: the service of a job that
// succeeded, as the planner recorded it ("" for any other job: a failed or
// cancelled job's service says nothing about how long jobs need).
func serviceOf(j jobs.Job) string {
	if j.State != jobs.Succeeded || j.Planner == nil || !j.Planner.Finished {
		return ""
	}
	v := j.Planner.AttainedGPUSeconds
	if !(v > 0) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// ServiceHistory is the service (GPU seconds; worker seconds for CPU-only
// jobs) of the newest succeeded jobs the planner has cleaned up, newest
// first, at most ServiceHistoryMax: what the planner learns job sizes from.
// A job's service is added once, by the write that marks it finished.
func (s *Store) ServiceHistory(ctx context.Context) ([]float64, error) {
	raw, err := s.rdb.LRange(ctx, s.serviceKey(), 0, ServiceHistoryMax-1).Result()
	if err != nil {
		return nil, fmt.Errorf("service history: %w", err)
	}
	out := make([]float64, 0, len(raw))
	for _, r := range raw {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("service history: entry %q: not a positive number of GPU seconds", r)
		}
		out = append(out, v)
	}
	return out, nil
}
