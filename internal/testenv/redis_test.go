package testenv

import (
	"context"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestRedisSmoke(t *testing.T) {
	r := NewRedis(t)
	ctx := context.Background()
	key := r.Prefix + "lease"
	ok, err := r.Client.SetNX(ctx, key, "w1", 500*time.Millisecond).Result()
	if err != nil || !ok {
		t.Fatalf("SET NX PX = %v, %v; want true", ok, err)
	}
	ok, err = r.Client.SetNX(ctx, key, "w2", 500*time.Millisecond).Result()
	if err != nil || ok {
		t.Fatalf("second SET NX = %v, %v; want false", ok, err)
	}
	got, err := r.Client.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{key}).Result()
	if err != nil || got != "w1" {
		t.Fatalf("Lua GET = %v, %v; want w1", got, err)
	}
}

func TestRedisPrefixesDiffer(t *testing.T) {
	a, b := NewRedis(t), NewRedis(t)
	if a.Prefix == b.Prefix {
		t.Fatalf("two NewRedis calls share prefix %q", a.Prefix)
	}
	if a.Addr != b.Addr {
		t.Fatalf("shared server expected, got %s and %s", a.Addr, b.Addr)
	}
}

func TestRedisRestartKeepsAcknowledgedWrites(t *testing.T) {
	r := NewRedisServer(t)
	ctx := context.Background()
	if err := r.Client.Set(ctx, r.Prefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Server.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	got, err := r.Client.Get(ctx, r.Prefix+"k").Result()
	if err != nil || got != "v" {
		t.Fatalf("after restart GET = %q, %v; want v", got, err)
	}
}
