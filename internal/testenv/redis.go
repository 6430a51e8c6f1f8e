package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a real redis-server child process on a loopback port.
type RedisServer struct {
	Addr string // host:port
	dir  string
	port int
	bin  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *bytes.Buffer
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
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &RedisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, port: port, bin: bin}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *RedisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = &bytes.Buffer{}
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "no",
		"--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := startChild(cmd); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	s.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	err := waitFor(10*time.Second, func() error {
		return c.Ping(context.Background()).Err()
	})
	if err != nil {
		stopChild(cmd, time.Second)
		return fmt.Errorf("redis-server on %s: %w; its output: %s", s.Addr, err, s.log.String())
	}
	return nil
}

// Stop shuts the server down (SIGTERM, then SIGKILL).
func (s *RedisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		stopChild(s.cmd, 5*time.Second)
		s.cmd = nil
	}
}

// Kill stops the server at once with SIGKILL, losing what is not yet in the AOF.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart stops the server and starts it again on the same port and data.
func (s *RedisServer) Restart() error {
	s.Stop()
	return s.start()
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

var sharedRedis struct {
	once sync.Once
	srv  *RedisServer
	err  error
}

// NewRedis gives the test the package's shared redis-server (started on first
// use) and a fresh key prefix. Use NewRedisServer for a server of its own.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	sharedRedis.once.Do(func() {
		dir, err := os.MkdirTemp("", "edl-redis-")
		if err != nil {
			sharedRedis.err = err
			return
		}
		sharedRedis.srv, sharedRedis.err = StartRedisServer(dir)
		if sharedRedis.err == nil {
			addSharedStop(func() { sharedRedis.srv.Stop(); os.RemoveAll(dir) })
		}
	})
	if sharedRedis.err != nil {
		Unavailable(t, "redis: %v", sharedRedis.err)
	}
	return newRedisFor(t, sharedRedis.srv)
}

// NewRedisServer starts a redis-server for this test alone (for tests that
// kill or restart it) and stops it when the test ends.
func NewRedisServer(t testing.TB) *Redis {
	t.Helper()
	dir := t.TempDir()
	srv, err := StartRedisServer(filepath.Clean(dir))
	if err != nil {
		Unavailable(t, "redis: %v", err)
	}
	t.Cleanup(srv.Stop)
	return newRedisFor(t, srv)
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
