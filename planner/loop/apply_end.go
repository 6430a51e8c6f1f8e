package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/edl-nomad/edl/jobs"
)

// applyFinish tears a terminal job down (once), records it, and sends the
// callback it claimed.
func (l *Loop) applyFinish(ctx context.Context, w JobWriter, s finishStep) error {
	j := s.job
	if s.teardown {
		if err := l.teardown(ctx, j.ID); err != nil {
			return err
		}
		l.log.Info("torn down", "job", j.ID, "state", j.State)
	}
	if s.inFlight {
		return nil
	}
	got, _, err := w.UpdateWith(ctx, j.ID, func(cur *jobs.Job) ([]jobs.Event, error) {
		var evs []jobs.Event
		if cur.Planner == nil || !cur.Planner.TornDown {
			evs = deadlineEnd(cur, cur.UpdatedAt, l.cfg.Now()) // once: with the teardown's record
		}
		cur.Planner = s.state.Clone()
		cur.Workers.Current, cur.Workers.Target = 0, 0 // a finished job holds no workers
		return evs, nil
	})
	if err != nil {
		return fmt.Errorf("finish %s: %w", j.ID, err)
	}
	if s.claim {
		l.send(ctx, w, got)
	}
	return nil
}

// teardown removes every worker of the job and the job from the cluster;
// whatever else a job holds while it runs is released here too.
func (l *Loop) teardown(ctx context.Context, jobID string) error {
	if err := l.holding(); err != nil {
		return err
	}
	if err := l.cluster.Teardown(ctx, jobID); err != nil {
		return fmt.Errorf("teardown %s: %w", jobID, err)
	}
	return nil
}

// send delivers j's callback in the background and records the outcome
// (only its class) as a job event; the job then leaves the finished queue.
func (l *Loop) send(ctx context.Context, w JobWriter, j jobs.Job) {
	l.mu.Lock()
	l.sending[j.ID] = true
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			delete(l.sending, j.ID)
			l.mu.Unlock()
		}()
		class, err := l.callbacks.Notify(ctx, j, l.holding)
		if l.holding() != nil || ctx.Err() != nil {
			return // lost the lease: the next planner sends it
		}
		outcome, ev := "delivered", jobs.Event{Type: jobs.EventState, Message: "callback delivered (" + class + ")",
			Data: map[string]any{"callback": class}}
		if err != nil {
			l.log.Warn("callback failed", "job", j.ID, "err", err)
			outcome, ev = "failed", jobs.Event{Type: jobs.EventError, Message: "callback failed (" + class + ")",
				Data: map[string]any{"callback": class}}
		}
		ev.Time = l.cfg.Now()
		_, _, err = w.UpdateWith(context.WithoutCancel(ctx), j.ID, func(cur *jobs.Job) ([]jobs.Event, error) {
			if cur.Planner == nil {
				cur.Planner = &jobs.PlannerState{}
			}
			cur.Planner.Callback, cur.Planner.Finished = outcome, true
			return []jobs.Event{ev}, nil
		})
		if err != nil {
			l.log.Warn("record callback outcome", "job", j.ID, "err", err)
		}
	}()
}

// applyCancel tears a cancelling job down and, once the cluster lists none
// of its workers live, marks it cancelled.
func (l *Loop) applyCancel(ctx context.Context, w JobWriter, s cancelStep) error {
	j := s.job
	if err := l.teardown(ctx, j.ID); err != nil {
		return fmt.Errorf("cancel %s: %w", j.ID, err)
	}
	ws, err := l.cluster.Workers(ctx, j.ID)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", j.ID, err)
	}
	if !cancelDone(ws) {
		return nil // next round
	}
	ps := s.state.Clone()
	ps.TornDown = true
	_, err = w.Update(ctx, j.ID, func(cur *jobs.Job) error {
		if cur.State != jobs.Cancelling {
			return &jobs.TransitionError{From: cur.State, To: jobs.Cancelled}
		}
		cur.Workers.Current, cur.Workers.Target = 0, 0
		cur.State, cur.Reason = jobs.Cancelled, "cancelled by tenant; all workers gone"
		cur.Planner = ps
		return nil
	})
	if err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
		return fmt.Errorf("cancel %s: %w", j.ID, err)
	}
	l.snap.remove(j.ID)
	delete(l.track, j.ID)
	l.log.Info("cancelled", "job", j.ID)
	l.roundAgain() // its callback: next round, from the finished queue
	return nil
}

// applySettle moves a job whose workers all exited to its end state.
func (l *Loop) applySettle(ctx context.Context, w JobWriter, s settleStep) error {
	j := s.job
	if err := l.holding(); err != nil {
		return err
	}
	if s.viaRunning {
		if _, err := w.Transition(ctx, j.ID, jobs.Running, "its workers ran"); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
			return fmt.Errorf("settle %s: %w", j.ID, err)
		}
	}
	_, err := w.Update(ctx, j.ID, func(cur *jobs.Job) error {
		if !jobs.CanTransition(cur.State, s.to) {
			return &jobs.TransitionError{From: cur.State, To: s.to}
		}
		cur.State, cur.Reason = s.to, s.reason
		cur.Workers.Current = 0
		cur.Planner = s.state
		return nil
	})
	if errors.Is(err, jobs.ErrInvalidTransition) {
		return nil // somebody else moved it; the snapshot catches up
	}
	if err != nil {
		return fmt.Errorf("settle %s: %w", j.ID, err)
	}
	l.log.Info("settled a job whose workers all exited", "job", j.ID, "state", s.to, "reason", s.reason)
	l.snap.remove(j.ID)
	l.roundAgain()
	return nil
}

// roundAgain asks for another round at once.
func (l *Loop) roundAgain() {
	l.mu.Lock()
	l.again = true
	l.mu.Unlock()
}
