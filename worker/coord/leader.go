package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// acquireScript takes the leader lease if it is free, or renews it when this
// worker holds it (also when it was handed over to us). It returns the fence
// the holder must present with every leader write, or 0.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return redis.call('INCR', KEYS[2])
elseif cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
return 0`)

// handoverScript gives the lease to a successor under a new fence.
var handoverScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
local f = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', KEYS[3], 'leader:' .. ARGV[3])
return f`)

// setGenScript writes the next generation if the caller still holds the
// lease under its fence and the current generation is the one it decided
// from (compare and set), clears the failure reports and announces it.
var setGenScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then return -1 end
local cur = tonumber(redis.call('GET', KEYS[4]) or '0')
if cur ~= tonumber(ARGV[3]) then return -2 end
redis.call('SET', KEYS[3], ARGV[5])
redis.call('SET', KEYS[4], ARGV[4])
redis.call('DEL', KEYS[5])
redis.call('PUBLISH', KEYS[6], 'gen:' .. ARGV[4])
return tonumber(ARGV[4])`)

// gcScript deletes the records of members that are dead and in no
// generation, under the leader's fence.
var gcScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then return -1 end
local n = 0
for i = 3, #ARGV do
  if redis.call('EXISTS', KEYS[4] .. ARGV[i]) == 0 then
    n = n + redis.call('HDEL', KEYS[3], ARGV[i])
  end
end
return n`)

// LeaderOptions tune the leader's decisions.
type LeaderOptions struct {
	MinStart   int // ready workers before generation 1
	MaxWorkers int // 0: no limit
	// LastCall is how long ready newcomers wait for workers still
	// preparing (Snapshot.LastCall); 0: no wait.
	LastCall time.Duration
	Window   time.Duration // wait for failure reports this long
	Poll     time.Duration // look again at least this often
	// OnFormed, when set, is called after this leader wrote generation g,
	// with the members g dropped without a graceful leave (Decision.Lost).
	// It runs on the leader's goroutine: it must not block.
	OnFormed func(g *Generation, lost []Loss)
}

// Leader runs one worker's bid for leadership and, while it leads, forms
// generations.
type Leader struct {
	c     *Client
	opts  LeaderOptions
	now   func() time.Time
	fence atomic.Int64 // > 0 while this worker leads

	firstReport time.Time
	readySince  time.Time // when the ready newcomers were first seen
	lastGC      time.Time
}

// NewLeader returns the leader loop of c's worker; now is the clock.
func NewLeader(c *Client, opts LeaderOptions, now func() time.Time) *Leader {
	if opts.Poll <= 0 {
		opts.Poll = c.cfg.Lease / 5
	}
	if opts.Window <= 0 {
		opts.Window = c.cfg.Lease / 4
	}
	return &Leader{c: c, opts: opts, now: now}
}

// Run bids for the lease and leads until ctx ends.
func (l *Leader) Run(ctx context.Context) error {
	ps := l.c.rdb.Subscribe(ctx, l.c.keys.Channel())
	defer ps.Close()
	events := ps.Channel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
		case <-timer.C:
		}
		recheck := l.opts.Poll
		if d, err := l.tick(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.c.log.Warn("leader tick failed", "err", err)
		} else if d > 0 && d < recheck {
			recheck = d
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(recheck)
	}
}

func (l *Leader) tick(ctx context.Context) (time.Duration, error) {
	k := l.c.keys
	f, err := acquireScript.Run(ctx, l.c.rdb, []string{k.Leader(), k.Fence()},
		l.c.cfg.Worker, l.c.cfg.Lease.Milliseconds()).Int64()
	if err != nil {
		l.fence.Store(0)
		return 0, fmt.Errorf("acquire leader lease: %w", err)
	}
	if old := l.fence.Swap(f); old != f && f > 0 {
		l.c.log.Info("leading", "fence", f)
		l.firstReport, l.readySince = time.Time{}, time.Time{}
	}
	if f == 0 {
		return 0, nil
	}
	return l.decide(ctx, f)
}

func (l *Leader) decide(ctx context.Context, fence int64) (time.Duration, error) {
	if done, err := l.c.Done(ctx); err != nil || done {
		return 0, err
	}
	g, err := l.c.ReadGen(ctx)
	if err != nil {
		return 0, err
	}
	members, err := l.c.Members(ctx)
	if err != nil {
		return 0, err
	}
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	if g != nil {
		ids = append(ids, g.Members...)
	}
	alive, err := l.c.Alive(ctx, ids)
	if err != nil {
		return 0, err
	}
	reports, err := l.c.Reports(ctx)
	if err != nil {
		return 0, err
	}
	now := l.now()
	if current(g, reports) == 0 {
		l.firstReport = time.Time{}
	} else if l.firstReport.IsZero() {
		l.firstReport = now
	}
	snap := Snapshot{Gen: g, Members: members, Alive: alive, Reports: reports, FirstReport: l.firstReport,
		MinStart: l.opts.MinStart, MaxWorkers: l.opts.MaxWorkers, LastCall: l.opts.LastCall}
	if len(snap.newcomers()) == 0 {
		l.readySince = time.Time{}
	} else if l.readySince.IsZero() {
		l.readySince = now
	}
	snap.ReadySince = l.readySince
	d := Decide(snap, now, l.opts.Window)
	if now.Sub(l.lastGC) > l.c.cfg.Lease {
		l.lastGC = now
		l.gc(ctx, fence, g, members, alive)
	}
	if d.Next == nil {
		return d.Recheck, nil
	}
	d.Next.FormedAt = now
	var expect int64
	if g != nil {
		expect = g.Number
	}
	if err := l.write(ctx, fence, expect, d.Next); err != nil {
		return 0, err
	}
	l.firstReport, l.readySince = time.Time{}, time.Time{}
	l.c.log.Info("generation formed", "gen", d.Next.Number, "members", d.Next.Members, "root", d.Next.Root,
		"sync", d.Next.Sync, "last_applied", d.Next.LastApplied, "reason", d.Next.Reason, "lost", d.Lost)
	if l.opts.OnFormed != nil {
		l.opts.OnFormed(d.Next, d.Lost)
	}
	return 0, nil
}

// current counts the reports about generation g (the report window starts
// with the first of them; older ones do not count).
func current(g *Generation, reports map[string]Report) int {
	n := 0
	for _, r := range reports {
		if g != nil && r.Gen == g.Number {
			n++
		}
	}
	return n
}

func (l *Leader) write(ctx context.Context, fence, expect int64, g *Generation) error {
	k := l.c.keys
	b, _ := json.Marshal(g)
	n, err := setGenScript.Run(ctx, l.c.rdb,
		[]string{k.Leader(), k.Fence(), k.Gen(), k.GenNum(), k.Reports(), k.Channel()},
		l.c.cfg.Worker, fence, expect, g.Number, b).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("write generation %d: %w", g.Number, err)
	case n == -1:
		l.fence.Store(0)
		return fmt.Errorf("write generation %d: deposed (fence %d)", g.Number, fence)
	case n == -2:
		return fmt.Errorf("write generation %d: generation changed meanwhile", g.Number)
	}
	return nil
}

func (l *Leader) gc(ctx context.Context, fence int64, g *Generation, members map[string]Member, alive map[string]bool) {
	args := []any{l.c.cfg.Worker, fence}
	for id := range members {
		if !alive[id] && g.Rank(id) < 0 {
			args = append(args, id)
		}
	}
	if len(args) == 2 {
		return
	}
	k := l.c.keys
	if err := gcScript.Run(ctx, l.c.rdb, []string{k.Leader(), k.Fence(), k.Members(), k.Heartbeat("")}, args...).Err(); err != nil {
		l.c.log.Warn("member gc failed", "err", err)
	}
}

// Handover gives the lease to successor if this worker holds it, so a
// leaving leader does not make the job wait for its lease to lapse.
func (l *Leader) Handover(ctx context.Context, successor string) error {
	f := l.fence.Load()
	if f == 0 || successor == "" {
		return nil
	}
	k := l.c.keys
	_, err := handoverScript.Run(ctx, l.c.rdb, []string{k.Leader(), k.Fence(), k.Channel()},
		l.c.cfg.Worker, f, successor, l.c.cfg.Lease.Milliseconds()).Int64()
	l.fence.Store(0)
	if err != nil {
		return fmt.Errorf("hand leader lease to %s: %w", successor, err)
	}
	return nil
}
