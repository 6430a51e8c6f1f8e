package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/local"
	"github.com/edl-nomad/edl/local/redisproc"
	"github.com/redis/go-redis/v9"
)

// Env is what the edl binary lends the benchmarks: the benchmarks that
// drive a whole `edl dev` (chaos, e2e, torch's edl-restart) start it in
// this process through StartDev, which cmd/edl wires exactly as `edl dev`.
type Env struct {
	StartDev func(ctx context.Context, c DevConfig, log *slog.Logger) (*Dev, error)
}

// DevConfig is the part of `edl dev`'s flags a benchmark sets.
type DevConfig struct {
	Listen, DataDir, Tenants  string
	Slots                     int
	Grace, Cooldown, Interval time.Duration
	WorkerLogLevel            string
	WorkerEnv                 []string // added to each worker's environment (chaos: EDL_DEBUG_SAMPLES)
}

// Dev is a running `edl dev` as a benchmark sees it.
type Dev struct {
	APIURL  string
	Tokens  jobs.DevTokens
	Store   *jobstore.Store
	Cluster *local.Cluster
	RDB     *redis.Client
	Redis   *redisproc.Supervised
	// RestartPlanner kills the planner loop wherever it is and starts a
	// fresh one with nothing in memory from the old one.
	RestartPlanner func(ctx context.Context) error
	// Shutdown stops everything StartDev started.
	Shutdown func()
}

// Validate names the field at fault: a benchmark's `edl dev` listens
// somewhere, keeps its data somewhere, and has slots, a grace and a round
// interval.
func (c DevConfig) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("bench: DevConfig.Listen is required")
	case c.DataDir == "":
		return errors.New("bench: DevConfig.DataDir is required")
	case c.Slots < 1:
		return fmt.Errorf("bench: DevConfig.Slots %d: must be at least 1", c.Slots)
	case c.Grace <= 0:
		return fmt.Errorf("bench: DevConfig.Grace %s: must be positive", c.Grace)
	case c.Cooldown < 0:
		return fmt.Errorf("bench: DevConfig.Cooldown %s: must not be negative", c.Cooldown)
	case c.Interval <= 0:
		return fmt.Errorf("bench: DevConfig.Interval %s: must be positive", c.Interval)
	}
	return nil
}
