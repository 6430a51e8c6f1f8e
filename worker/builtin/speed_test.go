package builtin

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

func TestSpeedMeterEWMA(t *testing.T) {
	var m speedMeter
	if got := m.millis(); got != 0 {
		t.Fatalf("fresh meter = %g, want 0", got)
	}
	m.observe(100*time.Millisecond, 1, 3)
	if got := m.millis(); got != 100 {
		t.Fatalf("after one 100ms step = %g, want 100", got)
	}
	m.observe(200*time.Millisecond, 1, 3)
	if got, want := m.millis(), 100+speedAlpha*100; got != want {
		t.Fatalf("after 100ms, 200ms = %g, want %g", got, want)
	}
	// A new generation starts afresh: no figure of another world size
	// leaks into it.
	m.observe(50*time.Millisecond, 2, 4)
	if got := m.millis(); got != 50 || m.gen.Load() != 2 || m.world.Load() != 4 {
		t.Fatalf("after a new generation = %g (gen %d, world %d), want 50 (gen 2, world 4)", got, m.gen.Load(), m.world.Load())
	}
}

func TestParseSpeedFigure(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SpeedFigure
		bad  bool
	}{
		{in: `{"ms":42.5,"gen":3,"world":4,"at":1700000000000}`, want: SpeedFigure{42.5, 3, 4, 1700000000000}},
		{in: "12.500", want: SpeedFigure{StepMillis: 12.5}},
		{in: "x", bad: true},
		{in: `{"ms":-1,"gen":1,"world":1,"at":1}`, bad: true},
		{in: "0", bad: true},
	} {
		got, err := ParseSpeedFigure(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseSpeedFigure(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestSpeedWriterWritesFieldWithTTLAndClears(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	key := r.Prefix + "{j}:speed"
	var m speedMeter
	at := time.UnixMilli(1700000000000)
	sw := &speedWriter{rdb: r.Client, key: key, worker: "w1", meter: &m, every: time.Second, ttl: 30 * time.Second, log: workertest.TestLog(t),
		now: func() time.Time { return at }}
	if err := sw.write(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Client.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("speed written before any step was measured")
	}
	m.observe(42500*time.Microsecond, 7, 3)
	if err := sw.write(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := r.Client.HGet(ctx, key, "w1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if f, err := ParseSpeedFigure(v); err != nil || f != (SpeedFigure{42.5, 7, 3, at.UnixMilli()}) {
		t.Fatalf("field = %q (%+v, %v), want 42.5 ms in generation 7 of 3 at %d", v, f, err, at.UnixMilli())
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
	c := workertest.NewCluster(t, r, workertest.TestSpec(50, 1), 20*time.Millisecond)
	id := c.Start()
	key := c.Coord().Keys().Speed()
	ctx := context.Background()
	var ms float64
	c.WaitFor("a step time in "+key, 30*time.Second, func() bool {
		v, err := r.Client.HGet(ctx, key, id).Result()
		if err != nil {
			return false
		}
		f, err := ParseSpeedFigure(v)
		ms = f.StepMillis
		return err == nil && ms > 0 && f.Generation > 0 && f.WorldSize == 1 && time.Since(f.At()) < time.Minute
	})
	if ms < 20 {
		t.Fatalf("step time %g ms, want at least the 20 ms step delay", ms)
	}
	c.Signal(id, syscall.SIGTERM)
	if err := c.Wait(id, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.Client.HExists(ctx, key, id).Result(); ok {
		t.Fatal("a worker that left kept its step time")
	}
}
