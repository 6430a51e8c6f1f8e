package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// ExecConfig configures a worker in exec mode (trainer.kind "exec"); the
// rest comes from Config (job, worker id, lease, ...).
type ExecConfig struct {
	// Dir is this worker's own folder: the program's checkpoint folder
	// (Dir/checkpoint, EDL_CHECKPOINT_DIR) and its error file. Required.
	Dir string
	// Host is where the other workers reach this one: MASTER_ADDR when it
	// is rank 0. Default 127.0.0.1.
	Host string
	// MasterPort, when > 0, is the port reserved for rank 0's rendezvous
	// store (on Nomad the group's network port); 0: a free port is picked
	// for every generation.
	MasterPort int
	// Env is the worker's environment, the base of the program's.
	Env []string
	// Stdout and Stderr get the program's output (default: discarded).
	Stdout, Stderr io.Writer
	// TailLines of the program's stderr go into a failed job's reason
	// (default 20).
	TailLines int
	// Poll is how often a running generation looks at its members, besides
	// the pub/sub wake-ups (default 100ms).
	Poll time.Duration
	// SyncEvery is how often rank 0's worker looks for a new checkpoint in
	// the folder while the program runs (default 500ms).
	SyncEvery time.Duration
	// LiveTimeout bounds, in live mode, the program's collectives and
	// process-group setup (a frozen or dead peer fails the step on every
	// survivor within it) and a claim's round trips (default 5s).
	LiveTimeout time.Duration
	// WarmTimeout bounds, in restart mode, a warm interpreter's start and
	// imports; past it the program starts cold, and warm starts are off
	// for this worker (default 2m).
	WarmTimeout time.Duration
}

// Validate names the field at fault.
func (c ExecConfig) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("exec config: dir: empty")
	case c.MasterPort < 0 || c.MasterPort > 65535:
		return fmt.Errorf("exec config: master port %d: want 0-65535", c.MasterPort)
	case c.TailLines < 0:
		return errors.New("exec config: tail lines: must be >= 0")
	}
	return nil
}

// ReadSpec returns the job's spec (Deps.Spec, else the job store's).
func (w *ProgramWorker) ReadSpec(ctx context.Context) (*jobs.Spec, error) {
	return w.Deps.ReadSpec(ctx, w.Cfg.Job)
}

func (w *ProgramWorker) Register(ctx context.Context, s coord.MemberState) error {
	addr := net.JoinHostPort(w.Ecfg.Host, strconv.Itoa(w.Ecfg.MasterPort))
	switch {
	case w.LiveAddr != "":
		addr = w.LiveAddr // live mode: rank 0's program hosts the group's store
	case w.Cfg.Advertise != "":
		addr = w.Cfg.Advertise
	}
	w.Addr = addr
	return w.Membership.Register(ctx, s)
}

// Leave is the graceful exit: peers are told first (state leaving) so
// they stop their programs at once, the program is stopped, rank 0's
// folder synced, the lease handed over, the record deleted.
func (w *ProgramWorker) Leave(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second+w.Grace())
	defer cancel()
	w.Log.Info("leaving")
	_ = w.Register(ctx, coord.Leaving)
	w.Membership.Leave(ctx, w.Last, w.Rep)
	return nil
}

// Finish ends the job: to is succeeded (rank 0's program exited 0),
// failed (restart budget spent) or cancelled. Rank 0 of g, or the only
// one left when g is nil, records it.
func (w *ProgramWorker) Finish(ctx context.Context, g *coord.Generation, to jobs.State, reason string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if g == nil || g.Rank(w.Cfg.Worker) == 0 {
		if err := Retry(ctx, w.Log, "mark done", func() error { return w.Co.MarkDone(ctx, string(to)) }); err != nil {
			w.Log.Warn("mark job done", "err", err)
		}
		if g != nil || to != jobs.Cancelled {
			w.Rep.Transition(ctx, to, reason)
		}
	}
	return w.Exit(ctx, reason)
}

func (w *ProgramWorker) Exit(ctx context.Context, reason string) error {
	w.Membership.Exit(ctx)
	w.Rep.Flush(ctx)
	w.Log.Info("exiting", "reason", reason)
	return nil
}

func (w *ProgramWorker) Grace() time.Duration { return time.Duration(w.Ex.Grace()) * time.Second }

// ProgramWorker is what the two modes that run a user's program (restart
// and live) share: the config, the job's spec, the membership (member
// record, leader, generations watched, leave and stop requests), the
// reporter, the worker's folder and the wake-ups of the generation wait.
type ProgramWorker struct {
	Cfg  Config
	Ecfg ExecConfig
	Deps Deps
	Log  *slog.Logger
	Spec jobs.Spec
	Ex   jobs.ExecTrainer

	// Membership is the one the built-in worker holds (membership.go): the member
	// record, the leader, the generations watched, the leave and stop
	// requests. trainedIn is not used (last is the exec worker's); addr is
	// set by register (the address changes in live mode).
	Membership
	Rep *Reporter

	CkptDir string

	// Last is the generation this worker's program last ran in (nil: none yet).
	Last *coord.Generation

	LiveAddr string // live mode: host:port of the program's store (worker/live)
}

// NewProgramWorker checks its arguments and fills in the defaults; it
// does no I/O. Deps.Transport is not used.
func NewProgramWorker(cfg Config, ecfg ExecConfig, deps Deps) (*ProgramWorker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ecfg.Validate(); err != nil {
		return nil, err
	}
	if err := deps.Check(false); err != nil {
		return nil, err
	}
	if ecfg.Host == "" {
		ecfg.Host = "127.0.0.1"
	}
	if ecfg.Stdout == nil {
		ecfg.Stdout = io.Discard
	}
	if ecfg.Stderr == nil {
		ecfg.Stderr = io.Discard
	}
	if ecfg.TailLines == 0 {
		ecfg.TailLines = 20
	}
	if ecfg.Poll <= 0 {
		ecfg.Poll = 100 * time.Millisecond
	}
	if ecfg.SyncEvery <= 0 {
		ecfg.SyncEvery = 500 * time.Millisecond
	}
	if ecfg.LiveTimeout <= 0 {
		ecfg.LiveTimeout = 5 * time.Second
	}
	if ecfg.WarmTimeout <= 0 {
		ecfg.WarmTimeout = 2 * time.Minute
	}
	dir, err := filepath.Abs(ecfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("exec config: dir: %w", err)
	}
	ecfg.Dir = dir
	log := deps.Log.With("component", "worker", "mode", "exec", "job", cfg.Job, "worker", cfg.Worker)
	cc := coord.Config{Prefix: cfg.Prefix, Job: cfg.Job, Worker: cfg.Worker, Lease: cfg.Lease, Heartbeat: cfg.Heartbeat}
	co, err := coord.New(deps.Redis, cc, deps.Log)
	if err != nil {
		return nil, err
	}
	return &ProgramWorker{Cfg: cfg, Ecfg: ecfg, Deps: deps, Log: log,
		Membership: Membership{Self: cfg.Worker, Log: log, Now: deps.Now, Co: co, Wake: make(chan struct{}, 1)},
		CkptDir:    filepath.Join(ecfg.Dir, "checkpoint")}, nil
}
