package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// reporter writes progress and events to the job store off the step loop:
// the newest progress at most every `every`, events in order.
type reporter struct {
	jobs  JobSource
	job   string
	every time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	prog    *jobs.Progress
	events  []jobs.Event
	ckpt    *jobs.CheckpointRef
	running bool // the job was moved to running
	kick    chan struct{}
}

func newReporter(js JobSource, job string, every time.Duration, log *slog.Logger) *reporter {
	return &reporter{jobs: js, job: job, every: every, log: log, kick: make(chan struct{}, 1)}
}

func (r *reporter) progress(p jobs.Progress) {
	if r.jobs == nil {
		return
	}
	r.mu.Lock()
	r.prog = &p
	r.mu.Unlock()
}

func (r *reporter) event(typ jobs.EventType, msg string, data map[string]any) {
	if r.jobs == nil {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, jobs.Event{Type: typ, Message: msg, Data: data})
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// checkpoint records a committed checkpoint on the job (and, through the
// store, as an event).
func (r *reporter) checkpoint(ref jobs.CheckpointRef) {
	if r.jobs == nil {
		return
	}
	r.mu.Lock()
	r.ckpt = &ref
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *reporter) run(ctx context.Context) {
	if r.jobs == nil {
		return
	}
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		r.flush(ctx)
	}
}

// flush sends what is queued now.
func (r *reporter) flush(ctx context.Context) {
	if r.jobs == nil {
		return
	}
	r.mu.Lock()
	p, evs, running, ck := r.prog, r.events, r.running, r.ckpt
	r.prog, r.events, r.ckpt = nil, nil, nil
	if p != nil && p.Step >= 0 {
		r.running = true
	}
	r.mu.Unlock()
	for _, e := range evs {
		if _, err := r.jobs.AppendEvent(ctx, r.job, e); err != nil {
			r.log.Debug("append job event failed", "err", err)
		}
	}
	if ck != nil {
		if err := r.jobs.SetCheckpoint(ctx, r.job, *ck); err != nil {
			r.log.Debug("record checkpoint on the job failed", "err", err)
		}
	}
	if p == nil {
		return
	}
	if !running {
		if _, err := r.jobs.Transition(ctx, r.job, jobs.Running, "training"); err != nil {
			r.log.Debug("move job to running", "err", err)
		}
	}
	if err := r.jobs.SetProgress(ctx, r.job, *p); err != nil {
		r.log.Debug("set job progress failed", "err", err)
	}
}

// transition moves the job to a final state, synchronously.
func (r *reporter) transition(ctx context.Context, to jobs.State, reason string) {
	if r.jobs == nil {
		return
	}
	r.flush(ctx)
	if _, err := r.jobs.Transition(ctx, r.job, to, reason); err != nil {
		r.log.Warn("job state change failed", "to", to, "err", err)
	}
}
