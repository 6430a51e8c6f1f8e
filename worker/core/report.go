package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// Reporter writes progress and events to the job store off the step loop:
// the newest progress at most every `every`, events in order.
//
// Every write goes through send, one flush at a time. The job's state
// moves starting -> running with the first progress and running ->
// succeeded (or cancelled) at the end; the store refuses starting ->
// succeeded, so the final transition must not overtake the Running write
// of a flush still in flight (it once did: the job stayed starting for
// ever). transition therefore takes send too, and makes the Running
// write itself when no flush has landed one yet.
type Reporter struct {
	jobs  JobSource
	job   string
	every time.Duration
	log   *slog.Logger

	mu     sync.Mutex // guards the queue below
	prog   *jobs.Progress
	events []jobs.Event
	ckpt   *jobs.CheckpointRef
	kick   chan struct{}

	send sync.Mutex // held for a whole flush or transition
	// running: the job was moved to running, or the store said it is past
	// starting already (another rank 0 moved it). Guarded by send; set
	// only once the write landed, so a failed one is tried again.
	running bool
	// failing holds the writes whose last try failed: the first failure
	// of a kind is a warning, its repeats debug lines (a refused progress
	// write once went unseen at debug level for every job). Guarded by send.
	failing map[string]bool
}

func NewReporter(js JobSource, job string, every time.Duration, log *slog.Logger) *Reporter {
	return &Reporter{jobs: js, job: job, every: every, log: log, kick: make(chan struct{}, 1)}
}

// Progress keeps p as the newest progress, for Run to write at its next
// tick.
func (r *Reporter) Progress(p jobs.Progress) {
	r.keep(false, func() { r.prog = &p })
}

// Event queues an event and wakes Run to write it now.
func (r *Reporter) Event(typ jobs.EventType, msg string, data map[string]any) {
	r.keep(true, func() {
		r.events = append(r.events, jobs.Event{Type: typ, Message: msg, Data: data})
	})
}

// Checkpoint records a committed checkpoint on the job (and, through the
// store, as an event), waking Run to write it now.
func (r *Reporter) Checkpoint(ref jobs.CheckpointRef) {
	r.keep(true, func() { r.ckpt = &ref })
}

// keep runs set (which fills in the queue) under mu and, with wake, wakes
// Run at once rather than at its next tick. A Reporter without a
// JobSource keeps nothing.
func (r *Reporter) keep(wake bool, set func()) {
	if r.jobs == nil {
		return
	}
	r.mu.Lock()
	set()
	r.mu.Unlock()
	if wake {
		poke(r.kick)
	}
}

func (r *Reporter) Run(ctx context.Context) {
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
		r.Flush(ctx)
	}
}

// Flush sends what is queued now; it returns once it has landed (or failed).
func (r *Reporter) Flush(ctx context.Context) {
	if r.jobs == nil {
		return
	}
	r.send.Lock()
	defer r.send.Unlock()
	r.flushLocked(ctx)
}

func (r *Reporter) flushLocked(ctx context.Context) {
	r.mu.Lock()
	p, evs, ck := r.prog, r.events, r.ckpt
	r.prog, r.events, r.ckpt = nil, nil, nil
	r.mu.Unlock()
	for _, e := range evs {
		_, err := r.jobs.AppendEvent(ctx, r.job, e)
		r.outcome("append job event", err)
	}
	if ck != nil {
		r.outcome("record checkpoint on the job", r.jobs.SetCheckpoint(ctx, r.job, *ck))
	}
	if p == nil {
		return
	}
	if p.Step >= 0 && !r.running {
		r.outcome("move job to running", r.markRunning(ctx))
	}
	r.outcome("set job progress", r.jobs.SetProgress(ctx, r.job, *p))
}

// outcome logs a failed write: a warning the first time in a row, then at
// debug level until one succeeds. Called with send held.
func (r *Reporter) outcome(what string, err error) {
	if err == nil {
		delete(r.failing, what)
		return
	}
	if r.failing[what] {
		r.log.Debug(what+" failed", "err", err)
		return
	}
	if r.failing == nil {
		r.failing = map[string]bool{}
	}
	r.failing[what] = true
	r.log.Warn(what+" failed (repeats are logged at debug level)", "err", err)
}

// markRunning moves the job to running once. A refused transition means
// the job is past starting already (running, or cancelling): nothing to do.
func (r *Reporter) markRunning(ctx context.Context) error {
	_, err := r.jobs.Transition(ctx, r.job, jobs.Running, "training")
	if err == nil || errors.Is(err, jobs.ErrInvalidTransition) {
		r.running = true
		return nil
	}
	return err
}

// Transition moves the job to a final state, synchronously, after every
// queued write and any flush in flight. It retries while the store is
// away, until ctx ends: a lost final transition leaves the job unfinished.
func (r *Reporter) Transition(ctx context.Context, to jobs.State, reason string) {
	if r.jobs == nil {
		return
	}
	r.send.Lock()
	defer r.send.Unlock()
	r.flushLocked(ctx)
	err := Retry(ctx, r.log, "job state change to "+string(to), func() error {
		if to == jobs.Succeeded && !r.running {
			// Only running may succeed; no progress write has moved it yet.
			if err := r.markRunning(ctx); err != nil {
				return err
			}
		}
		_, err := r.jobs.Transition(ctx, r.job, to, reason)
		return err
	})
	if err != nil {
		r.log.Warn("job state change failed", "to", to, "err", err)
	}
}

// Lost records, as job events, the members that generation g dropped
// without a graceful leave: a worker's death is otherwise visible only as
// a smaller world (and, in exec mode, as its peers' programs failing
// with "Connection reset by peer"). A graceful leave has its own event,
// written by the leaver. It is the leader's OnFormed hook (NewLeader) in
// every mode: the events are queued and sent off the leader's loop.
func (r *Reporter) Lost(g *coord.Generation, lost []coord.Loss) {
	for _, l := range lost {
		r.Event(jobs.EventWorker,
			fmt.Sprintf("worker %s lost: %s; generation %d formed without it", l.Worker, l.Cause.Describe(), g.Number),
			map[string]any{"worker": l.Worker, "cause": string(l.Cause), "generation": g.Number, "lost": true})
	}
}
