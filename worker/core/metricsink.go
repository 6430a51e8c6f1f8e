package core

import (
	"context"
	"sync"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/redis/go-redis/v9"
)

// MetricSink sends the job's metric points (jobs/jobmetrics: the built-in
// trainer's loss per applied step, read by the sweep controller) off the
// step loop: points queue in memory and go in one pipelined write every
// metricsEvery. A write that fails is logged by the caller's logger and
// the points are dropped: metrics are for judging trials, and a gap only
// delays a rung.
type MetricSink struct {
	log *jobmetrics.Log
	job string

	mu      sync.Mutex
	pending []jobmetrics.Point
}

const (
	metricsEvery  = 200 * time.Millisecond
	metricsMaxBuf = 10000 // points queued at most; older ones dropped
)

func NewMetricSink(rdb redis.UniversalClient, prefix, job string) *MetricSink {
	return &MetricSink{log: jobmetrics.New(rdb, prefix), job: job}
}

// Add queues one step's values.
func (m *MetricSink) Add(step int64, epoch int, values map[string]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) >= metricsMaxBuf {
		m.pending = m.pending[1:]
	}
	m.pending = append(m.pending, jobmetrics.Point{Step: step, Epoch: epoch, Values: values})
}

// Start flushes every metricsEvery until stop is called, which flushes
// what is left and returns when it is written (or after a second), so
// that a worker's last steps are in the log before it exits.
func (m *MetricSink) Start(onErr func(error)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = periodic.Every(ctx, metricsEvery, func() bool {
			if err := m.flush(ctx); err != nil && ctx.Err() == nil {
				onErr(err)
			}
			return true
		})
	}()
	return func() {
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.Background(), time.Second)
		defer fcancel()
		if err := m.flush(fctx); err != nil {
			onErr(err)
		}
	}
}

func (m *MetricSink) flush(ctx context.Context) error {
	m.mu.Lock()
	pts := m.pending
	m.pending = nil
	m.mu.Unlock()
	return m.log.Append(ctx, m.job, pts...)
}
