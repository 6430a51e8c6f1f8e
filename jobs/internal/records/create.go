package records

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// New is a record to store (a job or a sweep) with its first event, under
// an idempotency value, and the keys it goes to.
type New struct {
	ID, Tenant string
	Data       []byte // the record's JSON
	Event      []byte // its first event's JSON
	// IdemValue is what IdemValue made ("" when there is no key); the
	// record is kept IdemTTL at IdemKey.
	IdemValue    string
	IdemTTL      time.Duration
	EventsMaxLen int64
	// Key is the record's hash; TenantKey and ActiveKey the sorted sets
	// that index it, scored by the sequence number SeqKey counts; EventsKey
	// its event stream.
	Key, TenantKey, ActiveKey, EventsKey, IdemKey, SeqKey string
	// ChangesKey, when set, is a sorted set of changed IDs scored by the
	// counter at ChangeSeqKey; Notify, when set, a channel told the ID.
	ChangesKey, ChangeSeqKey, Notify string
}

// createScript stores a new record unless the idempotency key already
// names one.
// KEYS: record, tenant index, active, events, idem, seq, then changes and
// chgseq when there is a change feed.
// ARGV: id, JSON, idem value ("" = no key), idem TTL ms, event JSON,
// events maxlen, tenant, notify channel ("" = none).
// Returns {1, seq} when created, {0, idem value} when the key was seen before.
var createScript = redis.NewScript(`
if ARGV[3] ~= '' then
  local prev = redis.call('GET', KEYS[5])
  if prev then return {0, prev} end
end
local seq = redis.call('INCR', KEYS[6])
redis.call('HSET', KEYS[1], 'v', 1, 'd', ARGV[2], 's', seq, 't', ARGV[7])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
redis.call('ZADD', KEYS[3], seq, ARGV[1])
if #KEYS == 8 then
  redis.call('ZADD', KEYS[7], redis.call('INCR', KEYS[8]), ARGV[1])
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'e', ARGV[5])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[5], ARGV[3], 'PX', ARGV[4])
end
if ARGV[8] ~= '' then
  redis.call('PUBLISH', ARGV[8], ARGV[1])
end
return {1, seq}
`)

// Create stores n in one step. It returns created, or, when n's
// idempotency key had already made a record, the idempotency record found
// (for Replayed).
func Create(ctx context.Context, rdb redis.Scripter, n New) (created bool, prev string, err error) {
	keys := []string{n.Key, n.TenantKey, n.ActiveKey, n.EventsKey, n.IdemKey, n.SeqKey}
	if n.ChangesKey != "" {
		keys = append(keys, n.ChangesKey, n.ChangeSeqKey)
	}
	res, err := createScript.Run(ctx, rdb, keys, n.ID, n.Data, n.IdemValue, n.IdemTTL.Milliseconds(),
		n.Event, n.EventsMaxLen, n.Tenant, n.Notify).Slice()
	if err != nil {
		return false, "", err
	}
	if len(res) == 2 && res[0] == int64(1) {
		return true, "", nil
	}
	if len(res) == 2 {
		prev, _ = res[1].(string)
	}
	return false, prev, nil
}
