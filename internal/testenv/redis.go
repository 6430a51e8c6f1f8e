package testenv

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/edl-nomad/edl/local/redisproc"
	"github.com/redis/go-redis/v9"
)

// RedisServer is a real redis-server child process on a loopback port
// (local/redisproc), which a test may kill or restart on the same port.
type RedisServer struct {
	Addr string // host:port
	dir  string
	opts redisproc.Options
	mu   sync.Mutex
	proc *redisproc.Proc
}

// URL is the redis:// URL of the server.
func (s *RedisServer) URL() string { return "redis://" + s.Addr }

// StartRedisServer starts a redis-server with its data in dir. appendonly is
// on, so a Restart keeps what was acknowledged. Callers must Stop it.
func StartRedisServer(dir string) (*RedisServer, error) {
	bin, err := lookBinary("EDL_REDIS_SERVER", "redis-server", "/usr/bin/redis-server")
	if err != nil {
		return nil, err
	}
	p, err := redisproc.Start(context.Background(), dir, redisproc.Options{Binary: bin, AppendFsync: "no"})
	if err != nil {
		return nil, err
	}
	_, ps, _ := net.SplitHostPort(p.Addr())
	port, _ := strconv.Atoi(ps)
	return &RedisServer{Addr: p.Addr(), dir: dir, opts: redisproc.Options{Binary: bin, Port: port, AppendFsync: "no"}, proc: p}, nil
}

// Stop shuts the server down (SIGTERM, then SIGKILL).
func (s *RedisServer) Stop() { s.end((*redisproc.Proc).Stop) }

// Kill stops the server at once with SIGKILL, losing what is not yet in the AOF.
func (s *RedisServer) Kill() { s.end((*redisproc.Proc).Kill) }

// end ends the running process, if any, with stop.
func (s *RedisServer) end(stop func(*redisproc.Proc)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		stop(s.proc)
		s.proc = nil
	}
}

// Restart stops the server and starts it again on the same port and data.
func (s *RedisServer) Restart() error {
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := redisproc.Start(context.Background(), s.dir, s.opts)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// Redis is what a test gets: a server, a key prefix of its own and a client.
type Redis struct {
	Server *RedisServer
	Addr   string
	URL    string
	// Prefix is unique to the test; keys outside it belong to other tests.
	Prefix string
	Client *redis.Client
}

var sharedRedis sharedServer[*RedisServer]

// NewRedis gives the test the package's shared redis-server (started on first
// use) and a fresh key prefix. Use NewRedisServer for a server of its own.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	return newRedisFor(t, sharedRedis.get(t, "redis", "edl-redis-", StartRedisServer))
}

// NewRedisServer starts a redis-server for this test alone (for tests that
// kill or restart it) and stops it when the test ends.
func NewRedisServer(t testing.TB) *Redis {
	t.Helper()
	return newRedisFor(t, ownServer(t, "redis", StartRedisServer))
}

func newRedisFor(t testing.TB, srv *RedisServer) *Redis {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	return &Redis{
		Server: srv,
		Addr:   srv.Addr,
		URL:    srv.URL(),
		Prefix: "t-" + slug(t.Name(), 40) + "-" + RandomID(4) + ":",
		Client: c,
	}
}
