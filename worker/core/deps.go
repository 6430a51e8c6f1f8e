package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/redis/go-redis/v9"
)

// Deps are the concrete things a worker talks to; cmd/edl wires them.
type Deps struct {
	Redis     redis.UniversalClient
	Transport *collective.Transport // the ring listener, open for the worker's life
	Jobs      JobSource             // nil: no progress, events or state changes
	Spec      *jobs.Spec            // nil: read from Jobs
	Log       *slog.Logger
	Now       func() time.Time
	// Store, when set, is where rank 0 writes checkpoints and where a job
	// with no live training state restores from (checkpoint.Open).
	Store checkpoint.Store
	// StepLog, when set, gets one line per applied step:
	// "unix_ns step generation world epoch loss".
	StepLog io.Writer
}

// AdvertiseAddr resolves an --advertise value against the listener's
// address: "host:port" is used as is, a bare "host" gets the listener's
// port (useful with --listen 0.0.0.0:0), "" means the listener's address.
func AdvertiseAddr(advertise, listenAddr string) (string, error) {
	if advertise == "" {
		return listenAddr, nil
	}
	if _, _, err := net.SplitHostPort(advertise); err == nil {
		return advertise, nil
	}
	_, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return "", fmt.Errorf("advertise %q: listener address %q: %w", advertise, listenAddr, err)
	}
	if strings.ContainsAny(advertise, "[]") {
		return "", fmt.Errorf("advertise %q: want host or host:port", advertise)
	}
	return net.JoinHostPort(advertise, port), nil
}

// Check fills in the defaults of d (a discarding logger, time.Now) and
// says what is missing: Redis always, Transport when the mode runs the
// ring in process (the built-in trainer), and Jobs or Spec.
func (d *Deps) Check(transport bool) error {
	switch {
	case transport && (d.Redis == nil || d.Transport == nil):
		return errors.New("worker: Redis and Transport are required")
	case d.Redis == nil:
		return errors.New("worker: Redis is required")
	case d.Jobs == nil && d.Spec == nil:
		return errors.New("worker: either Jobs or Spec is required")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return nil
}

// ReadSpec returns the job's spec: d.Spec, else the job store's.
func (d Deps) ReadSpec(ctx context.Context, job string) (*jobs.Spec, error) {
	if d.Spec != nil {
		return d.Spec, nil
	}
	j, err := d.Jobs.Get(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("worker: read job %s: %w", job, err)
	}
	return &j.Spec, nil
}

// NewLeader is the leader every mode runs: generation 1 waits for
// cfg.MinStart ready workers (default the spec's minimum), a generation
// holds up to cfg.MaxWorkers (default the API's limit: the planner decides
// how many run; the spec's max read at start may be stale, a PATCH can
// raise it). Ready newcomers wait cfg.LastCall for workers still
// preparing. onFormed may be nil.
func NewLeader(cfg Config, spec jobs.Spec, co *coord.Client, now func() time.Time, onFormed func(*coord.Generation, []coord.Loss)) *coord.Leader {
	minStart, maxW := cfg.MinStart, cfg.MaxWorkers
	if minStart == 0 {
		minStart = max(1, spec.Workers.Min)
	}
	if maxW == 0 {
		maxW = 1024
	}
	return coord.NewLeader(co, coord.LeaderOptions{MinStart: minStart, MaxWorkers: maxW,
		LastCall: max(cfg.LastCall, 0), Window: cfg.ReportWindow, OnFormed: onFormed}, now)
}
