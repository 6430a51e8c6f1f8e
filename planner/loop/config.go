package loop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// Config sets up the planner loop.
type Config struct {
	// Interval between rounds when nothing happens; submits, cancels and
	// resizes (the store's notifications) wake the loop at once, coalesced.
	Interval time.Duration
	// LeaseTTL is how long a silent active planner keeps the lease; a
	// stand-by takes over within about this long. It is renewed every
	// LeaseTTL/3 in its own goroutine.
	LeaseTTL time.Duration
	// Prefix is the Redis key prefix of the lease (default "edl:").
	Prefix string
	// Holder names this replica in the lease (host:pid or similar).
	Holder string
	// Policy tunes Decide, straggler replacement included
	// (Policy.Straggler; its zero value turns replacement off).
	Policy planner.Config
	// Tenants returns the tenants' quotas and weights for each round.
	Tenants func() []planner.TenantShare
	// Now reads the clock; default time.Now.
	Now func() time.Time
	// Speeds reads the workers' published step times for straggler
	// replacement; nil disables it.
	Speeds WorkerSpeeds
	// Done tells whether a job's training reached its end (the workers'
	// done marker), for settling a job whose workers have all exited; nil:
	// only the job's progress says so.
	Done JobDone
	// SettleAfter is how long every worker of a starting or running job
	// must have been gone (exited, 0 or not) before the planner settles the
	// job itself (default 10 s: longer than a cluster's restart delay).
	SettleAfter time.Duration
	// SaveEvery is how often a job's attained service is written to its
	// record, for a planner that takes over (default 30 s).
	SaveEvery time.Duration
	// Callbacks sends the completion callbacks; nil: NewCallbacks with the
	// zero CallbackConfig (public addresses only, unsigned).
	Callbacks *Callbacks
	// OnDecide, when set, is told how long each round's Decide took (the
	// API's edl_planner_decide_seconds).
	OnDecide func(time.Duration)
	// WorkerAuth, when set, gives each job's workers a Redis user of
	// their own (WorkerACL), made before they start and removed after
	// the job's teardown; nil: workers use whatever login they are given.
	WorkerAuth WorkerAuth
}

// WorkerSpeeds reads what a job's workers published about their speed, by
// worker id (cmd/edl implements it over the workers' speed hash).
type WorkerSpeeds interface {
	StepTimes(ctx context.Context, jobID string) (map[string]planner.WorkerSpeed, error)
}

// JobDone reads whether a job's training reached its end; state is the
// final state the workers recorded (jobs.Succeeded, ...), "" when not done.
type JobDone interface {
	JobDone(ctx context.Context, jobID string) (state jobs.State, err error)
}

// DefaultConfig is what `edl serve` runs with.
func DefaultConfig() Config {
	p := planner.DefaultConfig()
	p.Straggler = planner.DefaultStragglerConfig()
	return Config{Interval: 2 * time.Second, LeaseTTL: 5 * time.Second, Prefix: "edl:", Policy: p, Now: time.Now,
		SettleAfter: 10 * time.Second, SaveEvery: 30 * time.Second}
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
	case c.SettleAfter < 0:
		return fmt.Errorf("planner loop: settle_after %s: must not be negative", c.SettleAfter)
	case c.SaveEvery < 0:
		return fmt.Errorf("planner loop: save_every %s: must not be negative", c.SaveEvery)
	}
	return c.Policy.Validate()
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Interval = cmp.Or(c.Interval, d.Interval)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, d.LeaseTTL)
	c.Prefix = cmp.Or(c.Prefix, d.Prefix)
	c.Policy = cmp.Or(c.Policy, d.Policy) // the zero Config: all defaults
	c.SettleAfter = cmp.Or(c.SettleAfter, d.SettleAfter)
	c.SaveEvery = cmp.Or(c.SaveEvery, d.SaveEvery)
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}
