package bench

import (
	"context"
	"fmt"
	"os"

	"github.com/edl-nomad/edl/local/redisproc"
	"github.com/redis/go-redis/v9"
)

// startRedis starts a redis-server of the bench's own (appendfsync
// everysec) in a new temporary folder and returns it and a client of
// poolSize connections to it; stop closes the client, stops the server and removes
// the folder. name ("bench api") prefixes the server's start error, pattern
// names the folder.
func startRedis(ctx context.Context, name, pattern string, poolSize int) (rp *redisproc.Proc, rdb *redis.Client, stop func(), err error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, nil, nil, err
	}
	rp, err = redisproc.Start(ctx, dir, redisproc.Options{AppendFsync: "everysec"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	rdb = redis.NewClient(&redis.Options{Addr: rp.Addr(), PoolSize: poolSize})
	return rp, rdb, func() { rdb.Close(); rp.Stop(); os.RemoveAll(dir) }, nil
}
