package worker

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

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

// speedMeter is an EWMA of this worker's per-step compute time (the
// gradient, not the all-reduce). The step loop is its only writer; the
// speed writer reads it from another goroutine.
type speedMeter struct {
	bits atomic.Uint64 // math.Float64bits of milliseconds; 0: no step yet
}

// observe folds one step's compute time in.
func (m *speedMeter) observe(d time.Duration) {
	ms := float64(d) / float64(time.Millisecond)
	if old := m.millis(); old > 0 {
		ms = old + speedAlpha*(ms-old)
	}
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
}

func (s *speedWriter) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.write(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("write step time failed", "err", err)
		}
	}
}

// write sets this worker's field and refreshes the hash's TTL; nothing
// before the first measured step.
func (s *speedWriter) write(ctx context.Context) error {
	ms := s.meter.millis()
	if ms <= 0 {
		return nil
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.key, s.worker, strconv.FormatFloat(ms, 'f', 3, 64))
		p.Expire(ctx, s.key, s.ttl)
		return nil
	})
	return err
}

// clear removes this worker's field (it is leaving).
func (s *speedWriter) clear(ctx context.Context) error {
	return s.rdb.HDel(ctx, s.key, s.worker).Err()
}
