package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
	"github.com/redis/go-redis/v9"
)

// Config sets up the planner loop.
type Config struct {
	// Interval between rounds when nothing happens; submits, cancels and
	// resizes wake the loop at once.
	Interval time.Duration
	// LeaseTTL is how long a silent active planner keeps the lease; a
	// stand-by takes over within about this long.
	LeaseTTL time.Duration
	// Prefix is the Redis key prefix of the lease (default "edl:").
	Prefix string
	// Holder names this replica in the lease (host:pid or similar).
	Holder string
	// Policy tunes Decide.
	Policy planner.Config
	// Tenants returns the tenants' quotas and weights for each round.
	Tenants func() []planner.TenantShare
	// Now reads the clock; default time.Now.
	Now func() time.Time
	// Speeds reads the workers' step times for straggler replacement; nil
	// disables it.
	Speeds WorkerSpeeds
	// StragglerFactor: a worker slower than this times the median of its
	// job's workers is slow (default 1.5; must be > 1).
	StragglerFactor float64
	// StragglerRounds is how many consecutive rounds a worker must be slow
	// before it is replaced (default 3).
	StragglerRounds int
	// StragglerCooldown is the least time between two replacements in one
	// job (default 2 min).
	StragglerCooldown time.Duration
}

// DefaultConfig is what `edl serve` runs with.
func DefaultConfig() Config {
	return Config{Interval: 2 * time.Second, LeaseTTL: 5 * time.Second, Prefix: "edl:", Policy: planner.DefaultConfig(), Now: time.Now,
		StragglerFactor: 1.5, StragglerRounds: 3, StragglerCooldown: 2 * time.Minute}
}

// Validate names the field at fault.
func (c Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("planner loop: interval %s: must be positive", c.Interval)
	case c.LeaseTTL <= 0:
		return fmt.Errorf("planner loop: lease_ttl %s: must be positive", c.LeaseTTL)
	case c.Holder == "":
		return errors.New("planner loop: holder is empty")
	case c.StragglerFactor <= 1:
		return fmt.Errorf("planner loop: straggler_factor %g: must be > 1", c.StragglerFactor)
	case c.StragglerRounds < 1:
		return fmt.Errorf("planner loop: straggler_rounds %d: must be at least 1", c.StragglerRounds)
	case c.StragglerCooldown < 0:
		return fmt.Errorf("planner loop: straggler_cooldown %s: must not be negative", c.StragglerCooldown)
	}
	return c.Policy.Validate()
}

// Loop is the active planner: each round it snapshots the job store and the
// cluster, calls Decide, and applies the plan.
type Loop struct {
	cfg     Config
	store   *jobs.Store
	cluster planner.Cluster
	lease   *Lease
	log     *slog.Logger
	// per-job memory the store does not keep: attained service, measured
	// throughput, last resize; rebuilt from scratch after a takeover.
	track map[string]*tracked
	// managed are jobs this planner has given workers; when one leaves the
	// active set (finished) its workers are torn down.
	managed map[string]bool
	last    time.Time
	// Rounds counts completed rounds (for tests and metrics).
	rounds    int64
	wake      chan struct{}
	callbacks *Callbacks
}

type tracked struct {
	attained   float64
	throughput map[int]float64
	lastResize time.Time
	// slow counts, per worker, the consecutive rounds it was a straggler;
	// lastReplace is when the last straggler was replaced.
	slow        map[string]int
	lastReplace time.Time
}

// New wires a loop; rdb holds the lease.
func New(cfg Config, store *jobs.Store, cluster planner.Cluster, rdb redis.UniversalClient, logger *slog.Logger) (*Loop, error) {
	d := DefaultConfig()
	if cfg.Interval == 0 {
		cfg.Interval = d.Interval
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = d.LeaseTTL
	}
	if cfg.Prefix == "" {
		cfg.Prefix = d.Prefix
	}
	if cfg.Policy == (planner.Config{}) {
		cfg.Policy = d.Policy
	}
	if cfg.Now == nil {
		cfg.Now = d.Now
	}
	if cfg.StragglerFactor == 0 {
		cfg.StragglerFactor = d.StragglerFactor
	}
	if cfg.StragglerRounds == 0 {
		cfg.StragglerRounds = d.StragglerRounds
	}
	if cfg.StragglerCooldown == 0 {
		cfg.StragglerCooldown = d.StragglerCooldown
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Loop{
		cfg: cfg, store: store, cluster: cluster,
		lease: NewLease(rdb, cfg.Prefix, cfg.Holder, cfg.LeaseTTL),
		log:   logger.With("component", "planner"),
		track: map[string]*tracked{}, managed: map[string]bool{},
		wake:      make(chan struct{}, 1),
		callbacks: NewCallbacks(logger),
	}, nil
}

// Wake asks for a round as soon as possible.
func (l *Loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run plans until ctx ends. Only the lease holder plans; the others renew
// their attempt every LeaseTTL/3.
func (l *Loop) Run(ctx context.Context) error {
	events := l.store.Subscribe(ctx)
	tick := time.NewTicker(l.cfg.Interval)
	defer tick.Stop()
	leaseTick := time.NewTicker(l.cfg.LeaseTTL / 3)
	defer leaseTick.Stop()
	var fence int64
	defer func() {
		if fence > 0 {
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = l.lease.Release(rctx)
		}
	}()
	acquire := func() {
		f, err := l.lease.TryAcquire(ctx)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("planner lease", "err", err)
			}
			fence = 0
			return
		}
		if f > 0 && fence == 0 {
			l.log.Info("planner active", "holder", l.cfg.Holder, "fence", f)
			l.track = map[string]*tracked{}
		} else if f == 0 && fence > 0 {
			l.log.Warn("planner lease lost; standing by", "holder", l.cfg.Holder)
		}
		fence = f
	}
	acquire()
	for {
		if fence > 0 {
			if err := l.Round(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("planner round", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-leaseTick.C:
			acquire()
			continue
		case <-tick.C:
		case <-events:
			// Let a burst of submissions settle into one round.
			time.Sleep(20 * time.Millisecond)
		case <-l.wake:
		}
		acquire()
	}
}

// Rounds is how many rounds have completed.
func (l *Loop) Rounds() int64 { return l.rounds }
