package jobstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// A worker logs in to Redis as a user that may touch only its own job's
// keys (planner/loop's WorkerACL), so its store is JobScoped: a write
// changes p{<job>}:job and appends to p{<job>}:events, and nothing else.
// What the full write also does (the change index, active -> finished on
// a terminal state) is the planner's to catch up on: Versions tells it
// which of the jobs it holds were written since it read them, and Settle
// moves a job a worker made terminal into the finished queue.

// casScopedScript is casScript without the global keys.
// KEYS: job, events. ARGV: as casScript's (terminal, channel unused).
var casScopedScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'v')
if not v then return -1 end
if v ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
local out = {1}
for i = 9, #ARGV do
  out[#out+1] = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'e', ARGV[i])
end
return out
`)

// Versions returns the stored version of each job in ids (0: gone), in
// one round trip.
func (s *Store) Versions(ctx context.Context, ids []string) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGet(ctx, s.jobKey(id), "v")
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("job versions: %w", err)
	}
	out := make([]int64, len(ids))
	for i, c := range cmds {
		v, err := c.Result()
		if err == redis.Nil {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("job version of %s: %w", ids[i], err)
		}
		out[i], _ = strconv.ParseInt(v, 10, 64)
	}
	return out, nil
}

// settleScript takes a terminal job out of active and changes and, unless
// the planner has cleaned it up already, queues it in finished.
// KEYS: job, active, changes, finished. ARGV: id, queue ("1" or "0").
var settleScript = redis.NewScript(`
local s = redis.call('HGET', KEYS[1], 's')
if not s then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[2] == '1' then redis.call('ZADD', KEYS[4], tonumber(s), ARGV[1]) end
return 1
`)

// Settle records in the global indexes that j, written by a JobScoped
// store, is terminal; a live job is left alone. Idempotent.
func (s *Store) Settle(ctx context.Context, j jobs.Job) error {
	if !j.State.Terminal() {
		return nil
	}
	queue := "1"
	if j.Planner != nil && j.Planner.Finished {
		queue = "0"
	}
	err := settleScript.Run(ctx, s.rdb, []string{s.jobKey(j.ID), s.activeKey(), s.changesKey(), s.finishedKey()}, j.ID, queue).Err()
	if err != nil {
		return fmt.Errorf("settle %s: %w", j.ID, err)
	}
	return nil
}

// SettleActive settles every job of the active index that a JobScoped
// store made terminal (what a planner does when it takes over).
func (s *Store) SettleActive(ctx context.Context) error {
	entries, err := s.rdb.ZRangeWithScores(ctx, s.activeKey(), 0, -1).Result()
	if err != nil {
		return fmt.Errorf("settle active jobs: %w", err)
	}
	all, err := s.decodeEntries(ctx, entries)
	if err != nil {
		return err
	}
	for _, j := range all {
		if err := s.Settle(ctx, j); err != nil {
			return err
		}
	}
	return nil
}
