package rhash

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Read reads the hash at key and returns what parse makes of each field
// and value, without the fields it refuses (ok false); what ("members")
// names the hash in the error of a failed read: "read members: ...".
func Read[K comparable, V any](ctx context.Context, rdb redis.Cmdable, key, what string, parse func(field, value string) (k K, v V, ok bool)) (map[K]V, error) {
	raw, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	out := make(map[K]V, len(raw))
	for f, s := range raw {
		if k, v, ok := parse(f, s); ok {
			out[k] = v
		}
	}
	return out, nil
}
