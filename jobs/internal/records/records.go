package records

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// NewID returns prefix + base-36 milliseconds + 8 hex random digits:
// short, URL- and DNS-safe, roughly time-ordered.
func NewID(prefix string, now time.Time) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return prefix + strconv.FormatInt(now.UnixMilli(), 36) + hex.EncodeToString(b)
}

// ValidID accepts what NewID makes (and similar: 3 to 64 of a-z, 0-9 and
// -), so that arbitrary path segments never reach a Redis key.
func ValidID(id string) bool {
	if len(id) < 3 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// MaxEventID is the largest stream ID: nothing comes after it.
const MaxEventID = "18446744073709551615-18446744073709551615"

// Events reads up to limit (default 100) entries of the stream key after
// afterID ("" = from the start), oldest first, each entry's "e" field
// decoded into an E and its ID set with setID.
func Events[E any](ctx context.Context, rdb redis.UniversalClient, key, afterID string, limit int, setID func(*E, string)) ([]E, error) {
	start := "-"
	if afterID != "" {
		if !jobs.ValidEventID(afterID) {
			return nil, jobs.Invalid("after", "not an event id")
		}
		if afterID == MaxEventID {
			// No ID follows it (Redis refuses the exclusive start).
			return []E{}, nil
		}
		start = "(" + afterID
	}
	if limit <= 0 {
		limit = 100
	}
	msgs, err := rdb.XRangeN(ctx, key, start, "+", int64(limit)).Result()
	if err != nil {
		return nil, err
	}
	return decode(msgs, setID)
}

// WaitEvents is Events that blocks up to block (at least 1 ms: 0 would be
// forever to Redis) for the first new entry; no entries and no error when
// block passes. The caller holds one Redis connection while it blocks.
func WaitEvents[E any](ctx context.Context, rdb redis.UniversalClient, key, afterID string, limit int, block time.Duration, setID func(*E, string)) ([]E, error) {
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
	res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{key, start}, Count: int64(limit), Block: block}).Result()
	if errors.Is(err, redis.Nil) || (err == nil && len(res) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decode(res[0].Messages, setID)
}

func decode[E any](msgs []redis.XMessage, setID func(*E, string)) ([]E, error) {
	out := make([]E, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["e"].(string)
		var ev E
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			return nil, fmt.Errorf("decode event %s: %w", m.ID, err)
		}
		setID(&ev, m.ID)
		out = append(out, ev)
	}
	return out, nil
}

// CASReply reads the reply of a store's compare-and-set script: -1, the
// record is gone (jobs.ErrNotFound); another number, someone wrote first
// (ok false: read again and retry); a list, written, with the IDs of the
// events appended after its first element.
func CASReply(res any) (eventIDs []string, ok bool, err error) {
	switch r := res.(type) {
	case int64:
		if r == -1 {
			return nil, false, jobs.ErrNotFound
		}
		return nil, false, nil
	case []any:
		ids := make([]string, 0, max(len(r)-1, 0))
		for _, v := range r[min(1, len(r)):] {
			id, _ := v.(string)
			ids = append(ids, id)
		}
		return ids, true, nil
	}
	return nil, false, fmt.Errorf("unexpected reply %v", res)
}

// Wrap prefixes a Redis error with what was being done ("events of j-1");
// nil and a validation error (the caller's input is at fault) stay as
// they are.
func Wrap(err error, what string) error {
	var ve *jobs.ValidationError
	if err == nil || errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Get reads the record (what: "job", "sweep") with that id from the hash
// key (field v its version, d its JSON): the record, its version, or
// jobs.ErrNotFound for an id NewID could not have made or no record.
func Get[T any](ctx context.Context, rdb redis.UniversalClient, key, what, id string) (T, string, error) {
	var rec T
	if !ValidID(id) {
		return rec, "", jobs.ErrNotFound
	}
	vals, err := rdb.HMGet(ctx, key, "v", "d").Result()
	if err != nil {
		return rec, "", fmt.Errorf("get %s %s: %w", what, id, err)
	}
	v, _ := vals[0].(string)
	d, _ := vals[1].(string)
	if v == "" || d == "" {
		return rec, "", jobs.ErrNotFound
	}
	if err := json.Unmarshal([]byte(d), &rec); err != nil {
		var zero T
		return zero, "", fmt.Errorf("decode %s %s: %w", what, id, err)
	}
	return rec, v, nil
}

// IdemKey is the key of tenant's idempotency record for an
// Idempotency-Key: prefix (the store's prefix and the record's kind,
// "edl:idem:") + tenant + ":" + the key's hex SHA-256.
func IdemKey(prefix, tenant, key string) string {
	sum := sha256.Sum256([]byte(key))
	return prefix + tenant + ":" + hex.EncodeToString(sum[:])
}

// SpecHash is the hex SHA-256 of spec's JSON, which an idempotency record
// keeps to tell a replay of its key from the key's reuse with another
// spec; "" when there is no key (nothing to compare). The error is
// json.Marshal's, for the caller to wrap.
func SpecHash(key string, spec any) (string, error) {
	if key == "" {
		return "", nil
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// IdemValue is the idempotency record stored with a new record id:
// "<id> <spec hash>", or "" when there is no key (none is stored).
func IdemValue(key, id, specHash string) string {
	if key == "" {
		return ""
	}
	return id + " " + specHash
}

// Replayed reads the idempotency record a create script found instead of
// creating: the ID of the record the key made before, or
// jobs.ErrIdempotencyMismatch when that was made from another spec.
func Replayed(record, specHash string) (string, error) {
	var prevID, prevHash string
	if _, err := fmt.Sscan(record, &prevID, &prevHash); err != nil {
		return "", fmt.Errorf("idempotency record %q: %w", record, err)
	}
	if prevHash != specHash {
		return "", jobs.ErrIdempotencyMismatch
	}
	return prevID, nil
}
