package redisproc

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestStartServesAndStopLeavesNoProcess(t *testing.T) {
	if _, err := os.Stat("/usr/bin/redis-server"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("redis-server not installed (make setup)")
	}
	ctx := context.Background()
	p, err := Start(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	aof, err := c.ConfigGet(ctx, "appendonly").Result()
	if err != nil || aof["appendonly"] != "yes" {
		t.Fatalf("appendonly = %v, %v; want yes", aof, err)
	}
	pid := p.Pid()
	p.Stop()
	<-p.Done()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("redis-server pid %d still alive after Stop", pid)
	}
}
