package records

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Follower wakes the followers of event logs (Redis streams: the API's
// job and sweep event streams) from one shared reader: a single XREAD
// BLOCK over every followed log, on one Redis connection, however many
// streams are open. A follower is only told that its log may have grown;
// it reads the new events itself (Events, a short non-blocking read). So an idle stream holds no
// Redis connection, where a blocking read per stream would hold one each and
// exhaust the pool (300 idle streams slowed every request to 750 ms).
//
// The reader runs while at least one log is followed and stops with the
// last Unfollow; it needs no Run or Close.
type Follower struct {
	rdb   redis.UniversalClient
	poll  time.Duration
	keyOf func(id string) string // a followed log's stream key

	mu      sync.Mutex
	logs    map[string]*followed // by stream key
	running bool
}

// followed is one log's entry. last is the newest event ID the reader knows
// of ("" until it has read it): reading from there misses nothing.
type followed struct {
	last string
	subs map[chan struct{}]struct{}
}

// NewFollower returns a Follower on rdb whose Follow takes the ID of a job
// or sweep, keyOf its log's stream key. poll bounds each blocking read
// (default 250 ms), which is also how soon a newly followed log joins the
// shared read.
func NewFollower(rdb redis.UniversalClient, poll time.Duration, keyOf func(id string) string) *Follower {
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	return &Follower{rdb: rdb, poll: poll, keyOf: keyOf, logs: map[string]*followed{}}
}

// Follow registers interest in id's log. The returned channel receives
// a value (coalesced: it holds at most one) whenever the log may have new
// events, and once when the shared reader has taken the log in, so that a
// caller which reads the log after Follow and again on every wake misses no
// event. Call the returned function to stop.
func (f *Follower) Follow(id string) (<-chan struct{}, func()) {
	key := f.keyOf(id)
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	j := f.logs[key]
	if j == nil {
		j = &followed{subs: map[chan struct{}]struct{}{}}
		f.logs[key] = j
	} else if j.last != "" {
		wake(ch) // the reader knows this log already: no initial wake comes
	}
	j.subs[ch] = struct{}{}
	if !f.running {
		f.running = true
		go f.run()
	}
	f.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(j.subs, ch)
			if len(j.subs) == 0 && f.logs[key] == j {
				delete(f.logs, key)
			}
		})
	}
}

// Followed is the number of logs followed now (for metrics and tests).
func (f *Follower) Followed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.logs)
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run is the shared reader. Each round it learns the newest event ID of
// logs just followed (one pipelined XREVRANGE), wakes their followers, then
// blocks in one XREAD over every followed log for at most poll.
func (f *Follower) run() {
	ctx := context.Background()
	for {
		f.mu.Lock()
		if len(f.logs) == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		var fresh, keys, afters []string
		for key, j := range f.logs {
			if j.last == "" {
				fresh = append(fresh, key)
				continue
			}
			keys = append(keys, key)
			afters = append(afters, j.last)
		}
		f.mu.Unlock()

		if len(fresh) > 0 {
			if err := f.learn(ctx, fresh); err != nil {
				f.failed()
				continue
			}
		}
		if len(keys) == 0 {
			continue
		}
		res, err := f.rdb.XRead(ctx, &redis.XReadArgs{
			Streams: append(keys, afters...), Count: 100, Block: f.poll}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			f.failed()
			continue
		}
		f.mu.Lock()
		for _, st := range res {
			j := f.logs[st.Stream]
			if j == nil || len(st.Messages) == 0 {
				continue
			}
			j.last = st.Messages[len(st.Messages)-1].ID
			for ch := range j.subs {
				wake(ch)
			}
		}
		f.mu.Unlock()
	}
}

// learn reads the newest event ID of each of keys and wakes their followers.
func (f *Follower) learn(ctx context.Context, keys []string) error {
	pipe := f.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(keys))
	for i, key := range keys {
		cmds[i] = pipe.XRevRangeN(ctx, key, "+", "-", 1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, key := range keys {
		j := f.logs[key]
		if j == nil {
			continue
		}
		j.last = "0-0" // no events yet: from the start
		if msgs, err := cmds[i].Result(); err == nil && len(msgs) > 0 {
			j.last = msgs[0].ID
		}
		for ch := range j.subs {
			wake(ch)
		}
	}
	return nil
}

// failed wakes every follower after a Redis error (each finds out for
// itself, with its own read) and waits a poll before the next try.
func (f *Follower) failed() {
	f.mu.Lock()
	for _, j := range f.logs {
		for ch := range j.subs {
			wake(ch)
		}
	}
	f.mu.Unlock()
	time.Sleep(f.poll)
}
