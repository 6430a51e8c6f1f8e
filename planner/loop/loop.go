package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/redis/go-redis/v9"
)

// errLeaseLost ends a round (its context's cause) once the lease is gone.
var errLeaseLost = errors.New("planner lease lost")

// Loop is the active planner: each round it brings its snapshot of the job
// store up to date from what changed, lists the cluster, calls Decide, and
// applies the plan. Only the lease holder plans; its writes go through a
// store fenced with the lease's fence number.
type Loop struct {
	cfg       Config
	store     *jobstore.Store
	cluster   Cluster
	lease     *Lease
	log       *slog.Logger
	callbacks *Callbacks
	wake      chan struct{}

	// mu guards what a round and the callback goroutines share.
	mu sync.Mutex
	// fenced is the store the holder writes through (nil: not holding);
	// fence its fence number.
	fenced *jobstore.Store
	fence  int64
	// validUntil is when the lease lapses unless renewed (UnixNano of
	// time.Now, monotonic enough: a process woken from SIGSTOP finds it
	// past and stops before it writes).
	validUntil atomic.Int64
	snap       snapshot
	// track is per-job memory between rounds; what must survive a
	// takeover is also on the job record (jobs.PlannerState).
	track map[string]*tracked
	// sending are the jobs whose callback is in flight from this planner.
	sending map[string]bool
	// listed are the jobs whose workers this planner has listed once.
	listed map[string]struct{}
	last   time.Time
	// service is the store's service history as last read. It changes
	// only when a job leaves the finished queue, so it is read again only
	// on a holder's first round and after a round that saw finished jobs
	// (serviceDue), not every round.
	service    []float64
	serviceDue bool
	// again asks for another round at once (a job was settled).
	again bool
	// rounds counts completed rounds (tests, metrics).
	rounds atomic.Int64
	inRun  atomic.Bool
	// testHook, when set, runs at named points of a round (tests only).
	testHook func(point string)
}

type tracked struct {
	attained   float64
	saved      time.Time // when attained was last written to the record
	throughput map[int]float64
	lastResize time.Time
	// slow carries Decide's straggler counts; lastReplace is when the
	// last straggler was replaced.
	slow        map[string]int
	lastReplace time.Time
	// exitedSince is when the job was first seen with every worker gone.
	exitedSince time.Time
	// assumed is a deadline job's speed by size as of its last re-plan
	// (estimateMoved).
	assumed map[int]float64
}

// New wires a loop; rdb holds the lease.
func New(cfg Config, store *jobstore.Store, cluster Cluster, rdb redis.UniversalClient, logger *slog.Logger) (*Loop, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WorkerAuth != nil {
		cluster = newAuthCluster(cluster, cfg.WorkerAuth, cfg.Now)
	}
	cb := cfg.Callbacks
	if cb == nil {
		cb = NewCallbacks(CallbackConfig{}, logger)
	}
	return &Loop{
		cfg: cfg, store: store, cluster: cluster,
		lease:     NewLease(rdb, cfg.Prefix, cfg.Holder, cfg.LeaseTTL),
		log:       logger.With("component", "planner"),
		track:     map[string]*tracked{},
		sending:   map[string]bool{},
		listed:    map[string]struct{}{},
		wake:      make(chan struct{}, 1),
		callbacks: cb,
	}, nil
}

// Wake asks for a round as soon as possible.
func (l *Loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Rounds is how many rounds have completed.
func (l *Loop) Rounds() int64 { return l.rounds.Load() }

// Fence is the fence number this planner writes with, 0 when it does not
// hold the lease.
func (l *Loop) Fence() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced == nil {
		return 0
	}
	return l.fence
}

// Run plans until ctx ends. It stands by until it holds the lease, then
// plans one round per Interval or per outside change (submits, cancels,
// resizes: the store's notifications, coalesced), each under a context
// cancelled when the lease is lost; the lease is renewed every LeaseTTL/3
// in its own goroutine.
func (l *Loop) Run(ctx context.Context) error {
	l.inRun.Store(true)
	defer l.inRun.Store(false)
	events := l.store.Subscribe(ctx)
	for ctx.Err() == nil {
		fence := l.standBy(ctx)
		if fence == 0 {
			return nil
		}
		l.active(ctx, fence, events)
	}
	return nil
}

// standBy tries the lease every LeaseTTL/3 until it is held (its fence)
// or ctx ends (0).
func (l *Loop) standBy(ctx context.Context) (fence int64) {
	_ = periodic.Poll(ctx, l.cfg.LeaseTTL/3, func() bool {
		start := time.Now()
		f, err := l.lease.TryAcquire(ctx)
		if err != nil && ctx.Err() == nil {
			l.log.Warn("planner lease", "err", err)
		}
		if f > 0 {
			l.validUntil.Store(start.Add(l.cfg.LeaseTTL).UnixNano())
			fence = f
			return false
		}
		return true
	})
	return fence
}

// active plans while the lease is held.
func (l *Loop) active(ctx context.Context, fence int64, events <-chan string) {
	lctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	l.become(fence)
	defer l.resign()
	l.log.Info("planner active", "holder", l.cfg.Holder, "fence", fence)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		l.renew(lctx, fence, lost)
	}()
	defer func() {
		lost(nil)
		<-renewed
		if ctx.Err() != nil && l.holding() == nil {
			// Shutting down: hand the lease over at once.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = l.lease.Release(rctx)
		}
	}()
	timer := time.NewTimer(0) // the first round at once
	defer timer.Stop()
	for {
		select {
		case <-lctx.Done():
			if ctx.Err() == nil {
				l.log.Warn("planner lease lost; standing by", "holder", l.cfg.Holder, "fence", fence)
			}
			return
		case <-timer.C:
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Let a burst settle into one round.
			select {
			case <-lctx.Done():
				continue
			case <-time.After(20 * time.Millisecond):
			}
			drain(events)
		case <-l.wake:
		}
		drain(events)
		next, err := l.round(lctx)
		if err != nil && lctx.Err() == nil {
			l.log.Warn("planner round", "err", err)
		}
		timer.Reset(l.untilNext(next))
	}
}

// untilNext is how long to wait for the next round: the interval, or less
// when the round said it is due sooner, or none when a step asked for
// another round at once.
func (l *Loop) untilNext(next time.Time) time.Duration {
	d := l.cfg.Interval
	if !next.IsZero() {
		d = min(d, max(time.Until(next), 0))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.again {
		l.again, d = false, 0
	}
	return d
}

func drain(ch <-chan string) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// renew keeps the lease until it is lost: taken by another, or not renewed
// within LeaseTTL (then lost is called and the round's context ends).
func (l *Loop) renew(ctx context.Context, fence int64, lost context.CancelCauseFunc) {
	_ = periodic.Every(ctx, l.cfg.LeaseTTL/3, func() bool {
		l.hook("renew")
		if time.Now().UnixNano() >= l.validUntil.Load() {
			lost(errLeaseLost) // woken after the lease lapsed
			return false
		}
		start := time.Now()
		rctx, cancel := context.WithDeadline(ctx, time.Unix(0, l.validUntil.Load()))
		f, err := l.lease.TryAcquire(rctx)
		cancel()
		switch {
		case err == nil && f == fence:
			l.validUntil.Store(start.Add(l.cfg.LeaseTTL).UnixNano())
		case err == nil:
			lost(errLeaseLost)
			return false
		case ctx.Err() != nil:
			return false
		default:
			l.log.Warn("planner lease renewal", "err", err)
		}
		return true
	})
}

// become sets the loop up as the holder of fence: a fresh snapshot and
// fresh memory, read from the store and the job records.
func (l *Loop) become(fence int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fence, l.fenced = fence, l.store.WithFence(l.lease.FenceKey(), fence)
	l.snap = snapshot{}
	l.track = map[string]*tracked{}
	l.listed = map[string]struct{}{}
	l.last = time.Time{}
	l.service, l.serviceDue = nil, true
}

func (l *Loop) resign() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fenced = nil
}

// holding is nil while the lease is held by this planner as far as it can
// tell locally; cluster actions check it, store writes are fenced anyway.
func (l *Loop) holding() error {
	if time.Now().UnixNano() >= l.validUntil.Load() {
		return errLeaseLost
	}
	return nil
}

// writer returns the fenced store, taking the lease first when Round is
// called outside Run (tests, tools) and it is free.
func (l *Loop) writer(ctx context.Context) (*jobstore.Store, error) {
	l.mu.Lock()
	w, fence := l.fenced, l.fence
	l.mu.Unlock()
	if l.inRun.Load() {
		if w == nil {
			return nil, errLeaseLost
		}
		return w, nil
	}
	// Outside Run: take or renew the lease now.
	start := time.Now()
	f, err := l.lease.TryAcquire(ctx)
	if err != nil {
		return nil, err
	}
	if f == 0 {
		return nil, fmt.Errorf("planner round: %w: held by another planner", errLeaseLost)
	}
	l.validUntil.Store(start.Add(l.cfg.LeaseTTL).UnixNano())
	if w == nil || f != fence {
		l.become(f)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced, nil
}

func (l *Loop) hook(point string) {
	if l.testHook != nil {
		l.testHook(point)
	}
}
