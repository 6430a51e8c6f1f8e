package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/redis/go-redis/v9"
)

const (
	// speedAlpha is the weight of the newest step in the compute-time EWMA.
	speedAlpha = 0.2
	// speedEvery is the least time between two writes of the speed hash.
	speedEvery = time.Second
	// speedTTL is the speed hash's expiry, refreshed at every write.
	speedTTL = 30 * time.Second
)

// SpeedFigure is what a worker publishes in its job's speed hash (field:
// the worker id; value: this as JSON): the EWMA of its per-step compute
// time, the generation and world size it was measured in, and when.
type SpeedFigure struct {
	StepMillis float64 `json:"ms"`
	Generation int64   `json:"gen"`
	WorldSize  int     `json:"world"`
	// AtUnixMilli is when the figure was written.
	AtUnixMilli int64 `json:"at"`
}

// At is when the figure was written.
func (f SpeedFigure) At() time.Time { return time.UnixMilli(f.AtUnixMilli) }

// ParseSpeedFigure decodes one field of the speed hash. A bare number (the
// format of older workers) has no generation and no time: it is returned
// with AtUnixMilli 0, which the planner treats as not fresh.
func ParseSpeedFigure(v string) (SpeedFigure, error) {
	var f SpeedFigure
	if err := json.Unmarshal([]byte(v), &f); err == nil {
		if f.StepMillis <= 0 || f.Generation < 0 || f.WorldSize < 0 || f.AtUnixMilli < 0 {
			return SpeedFigure{}, fmt.Errorf("speed figure %q: out of range", v)
		}
		return f, nil
	}
	ms, err := strconv.ParseFloat(v, 64)
	if err != nil || ms <= 0 {
		return SpeedFigure{}, fmt.Errorf("speed figure %q: neither JSON nor a positive number", v)
	}
	return SpeedFigure{StepMillis: ms}, nil
}

// speedMeter is an EWMA of this worker's per-step compute time (the
// gradient, not the all-reduce), with the generation and world size of the
// last step. The step loop is its only writer; the speed writer reads it
// from another goroutine. A new generation starts the average afresh.
type speedMeter struct {
	bits  atomic.Uint64 // math.Float64bits of milliseconds; 0: no step yet
	gen   atomic.Int64
	world atomic.Int64
}

// observe folds one step's compute time, measured in generation gen of
// world workers, in.
func (m *speedMeter) observe(d time.Duration, gen int64, world int) {
	ms := float64(d) / float64(time.Millisecond)
	if old := m.millis(); old > 0 && m.gen.Load() == gen {
		ms = old + speedAlpha*(ms-old)
	}
	m.gen.Store(gen)
	m.world.Store(int64(world))
	m.bits.Store(math.Float64bits(ms))
}

// millis is the current average, 0 before the first step.
func (m *speedMeter) millis() float64 { return math.Float64frombits(m.bits.Load()) }

// speedWriter publishes a speedMeter into the job's speed hash, off the
// step loop, at most once per `every`.
type speedWriter struct {
	rdb    redis.UniversalClient
	key    string
	worker string
	meter  *speedMeter
	every  time.Duration
	ttl    time.Duration
	log    *slog.Logger
	now    func() time.Time // default time.Now
}

func (s *speedWriter) run(ctx context.Context) {
	_ = periodic.Every(ctx, s.every, func() bool {
		if err := s.write(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("write step time failed", "err", err)
		}
		return true
	})
}

// write sets this worker's field and refreshes the hash's TTL; nothing
// before the first measured step.
func (s *speedWriter) write(ctx context.Context) error {
	ms := s.meter.millis()
	if ms <= 0 {
		return nil
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	b, err := json.Marshal(SpeedFigure{StepMillis: math.Round(ms*1000) / 1000, Generation: s.meter.gen.Load(),
		WorldSize: int(s.meter.world.Load()), AtUnixMilli: now().UnixMilli()})
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.key, s.worker, b)
		p.Expire(ctx, s.key, s.ttl)
		return nil
	})
	return err
}

// clear removes this worker's field (it is leaving).
func (s *speedWriter) clear(ctx context.Context) error {
	return s.rdb.HDel(ctx, s.key, s.worker).Err()
}
