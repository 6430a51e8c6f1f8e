package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lease makes one planner active across `edl serve` replicas: whoever holds
// the Redis key plans; the others stand by and take over when it lapses.
// Every takeover increments the fence number; the active planner writes
// through a store fenced with it (jobstore.Store.WithFence), so a deposed
// planner's late writes are refused.
type Lease struct {
	rdb    redis.UniversalClient
	key    string
	fence  string
	holder string
	ttl    time.Duration
}

// NewLease returns a lease on prefix+"planner:lease" held as holder.
func NewLease(rdb redis.UniversalClient, prefix, holder string, ttl time.Duration) *Lease {
	return &Lease{rdb: rdb, key: prefix + "planner:lease", fence: prefix + "planner:fence", holder: holder, ttl: ttl}
}

// FenceKey is the key holding the newest fence number.
func (l *Lease) FenceKey() string { return l.fence }

// acquireScript takes the lease when free, renews it when ours; it returns
// the fence number while held, 0 otherwise.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return redis.call('INCR', KEYS[2])
`)

// TryAcquire takes or renews the lease; fence > 0 means it is held.
func (l *Lease) TryAcquire(ctx context.Context) (fence int64, err error) {
	n, err := acquireScript.Run(ctx, l.rdb, []string{l.key, l.fence}, l.holder, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("planner lease: %w", err)
	}
	return n, nil
}

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Release gives the lease up if held, so a stand-by takes over at once.
func (l *Lease) Release(ctx context.Context) error {
	return releaseScript.Run(ctx, l.rdb, []string{l.key}, l.holder).Err()
}
