package redisproc

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func needRedis(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/redis-server"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("redis-server not installed (make setup)")
	}
}

// A killed child comes back on the same address with what it had
// acknowledged (the append-only file in the same directory).
func TestSupervisedRestartsWithItsData(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	restarted := make(chan int, 4)
	s, err := StartSupervised(ctx, t.TempDir(), Options{}, SuperviseOptions{OnRestart: func(n int) { restarted <- n }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	if err := c.Set(ctx, "job", "acknowledged", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr, pid := s.Addr(), s.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-restarted:
		if n != 1 {
			t.Errorf("restart count %d, want 1", n)
		}
	case <-s.Failed():
		t.Fatalf("failed instead of restarting: %v", s.Err())
	case <-time.After(20 * time.Second):
		t.Fatal("not restarted within 20s")
	}
	if s.Addr() != addr || s.Pid() == pid {
		t.Errorf("after restart addr %s pid %d; want addr %s and a new pid (was %d)", s.Addr(), s.Pid(), addr, pid)
	}
	if got, err := c.Get(ctx, "job").Result(); err != nil || got != "acknowledged" {
		t.Fatalf("after restart GET = %q, %v; want the acknowledged write", got, err)
	}
	newPid := s.Pid()
	s.Stop()
	if syscall.Kill(newPid, 0) == nil {
		t.Errorf("pid %d alive after Stop", newPid)
	}
}

// A child that keeps dying is not restarted forever: Failed closes with
// a reason, for the caller to stop on.
func TestSupervisedGivesUp(t *testing.T) {
	needRedis(t)
	restarted := make(chan int, 4)
	s, err := StartSupervised(context.Background(), t.TempDir(), Options{},
		SuperviseOptions{MaxRestarts: 1, Window: time.Minute, OnRestart: func(n int) { restarted <- n }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	_ = syscall.Kill(s.Pid(), syscall.SIGKILL)
	select {
	case <-restarted:
	case <-time.After(20 * time.Second):
		t.Fatalf("first death not restarted: %v", s.Err())
	}
	_ = syscall.Kill(s.Pid(), syscall.SIGKILL)
	select {
	case <-s.Failed():
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "died 2 times") {
			t.Errorf("Err() = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("second death within the window did not fail it")
	}
}
