package worker

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
)

func TestSpeedMeterEWMA(t *testing.T) {
	var m speedMeter
	if got := m.millis(); got != 0 {
		t.Fatalf("fresh meter = %g, want 0", got)
	}
	m.observe(100 * time.Millisecond)
	if got := m.millis(); got != 100 {
		t.Fatalf("after one 100ms step = %g, want 100", got)
	}
	m.observe(200 * time.Millisecond)
	if got, want := m.millis(), 100+speedAlpha*100; got != want {
		t.Fatalf("after 100ms, 200ms = %g, want %g", got, want)
	}
}

func TestSpeedWriterWritesFieldWithTTLAndClears(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	key := r.Prefix + "{j}:speed"
	var m speedMeter
	sw := &speedWriter{rdb: r.Client, key: key, worker: "w1", meter: &m, every: time.Second, ttl: 30 * time.Second, log: testLog(t)}
	if err := sw.write(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Client.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("speed written before any step was measured")
	}
	m.observe(42500 * time.Microsecond)
	if err := sw.write(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := r.Client.HGet(ctx, key, "w1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := strconv.ParseFloat(v, 64); err != nil || ms != 42.5 {
		t.Fatalf("field = %q, want 42.5 ms", v)
	}
	if ttl, _ := r.Client.TTL(ctx, key).Result(); ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("ttl = %s, want (0, 30s]", ttl)
	}
	if err := sw.clear(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Client.HExists(ctx, key, "w1").Result(); n {
		t.Fatal("field left after clear")
	}
}

// A running worker publishes its step time, StepDelay included, and drops
// its field when it leaves.
func TestWorkerPublishesStepTime(t *testing.T) {
	r := testenv.NewRedis(t)
	c := newCluster(t, r, testSpec(50, 1), 20*time.Millisecond)
	id := c.start()
	key := c.coord().Keys().Speed()
	ctx := context.Background()
	var ms float64
	c.waitFor("a step time in "+key, 30*time.Second, func() bool {
		v, err := r.Client.HGet(ctx, key, id).Result()
		if err != nil {
			return false
		}
		ms, err = strconv.ParseFloat(v, 64)
		return err == nil && ms > 0
	})
	if ms < 20 {
		t.Fatalf("step time %g ms, want at least the 20 ms step delay", ms)
	}
	c.signal(id, syscall.SIGTERM)
	if err := c.wait(id, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.Client.HExists(ctx, key, id).Result(); ok {
		t.Fatal("a worker that left kept its step time")
	}
}
