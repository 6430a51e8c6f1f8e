package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/edl-nomad/edl/jobs"
)

// Apply carries out a round's plan: finished jobs first (teardown,
// callback), then cancels, settles, and the policy's targets. Every store
// write goes through the lease's fenced store and every cluster action is
// preceded by a check that the lease is still held; a step that fails is
// reported and left for the next round, which reads and decides again.
func (l *Loop) Apply(ctx context.Context, p RoundPlan) error {
	w := l.fencedStore()
	if w == nil {
		return errLeaseLost
	}
	var errs []error
	for _, s := range p.finish {
		errs = append(errs, l.applyFinish(ctx, w, s))
	}
	for _, s := range p.cancel {
		errs = append(errs, l.applyCancel(ctx, w, s))
	}
	for _, s := range p.settle {
		errs = append(errs, l.applySettle(ctx, w, s))
	}
	for _, s := range p.scale {
		if err := l.holding(); err != nil {
			errs = append(errs, err)
			break
		}
		errs = append(errs, l.applyScale(ctx, w, s, p))
		errs = append(errs, l.applyReplace(ctx, w, s, p))
	}
	return errors.Join(errs...)
}

func (l *Loop) fencedStore() JobWriter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fenced == nil {
		return nil
	}
	return l.fenced
}

// applyScale: start, drain, scale, suspend, record, in that order; a start
// or scale that fails ends the step (the next round plans again).
func (l *Loop) applyScale(ctx context.Context, w JobWriter, s scaleStep, p RoundPlan) error {
	j, t := s.job, s.target
	if s.start {
		if _, err := w.Transition(ctx, j.ID, jobs.Starting, t.Reason); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
			return fmt.Errorf("start %s: %w", j.ID, err)
		}
	}
	if err := l.holding(); err != nil {
		return err
	}
	for _, id := range s.drain {
		if err := l.cluster.StopWorker(ctx, j.ID, id, t.Reason); err != nil {
			_, _ = w.AppendEvent(ctx, j.ID, jobs.Event{Time: p.now, Type: jobs.EventError, Message: fmt.Sprintf("move worker %s off its draining node: %v", id, err)})
		}
	}
	if s.scale {
		if err := l.cluster.Scale(ctx, *j, s.count, t.Reason); err != nil {
			_, _ = w.AppendEvent(ctx, j.ID, jobs.Event{Time: p.now, Type: jobs.EventError, Message: fmt.Sprintf("scale to %d failed: %v", t.Workers, err)})
			return fmt.Errorf("scale %s to %d: %w", j.ID, t.Workers, err)
		}
	}
	var events []jobs.Event
	if s.resized {
		s.tr.lastResize = p.now
		l.log.Info("scale", "job", j.ID, "from", j.Workers.Target, "to", t.Workers, "reason", t.Reason)
		events = append(events, jobs.Event{Time: p.now, Type: jobs.EventScale, Message: t.Reason,
			Data: map[string]any{"from": j.Workers.Target, "to": t.Workers}})
	}
	if s.suspend {
		if _, err := w.Transition(ctx, j.ID, jobs.Suspended, t.Reason); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
			return fmt.Errorf("suspend %s: %w", j.ID, err)
		}
	}
	if !s.record {
		return nil
	}
	return l.recordWorkers(ctx, w, s, events, p)
}

// recordWorkers writes the job's worker counts, its queued reason and the
// planner state, keeping what only finish writes.
func (l *Loop) recordWorkers(ctx context.Context, w JobWriter, s scaleStep, events []jobs.Event, p RoundPlan) error {
	ps := plannerState(s.job, s.tr)
	got, _, err := w.UpdateWith(ctx, s.job.ID, func(cur *jobs.Job) ([]jobs.Event, error) {
		cur.Workers.Current, cur.Workers.Target = s.live, s.target.Workers
		if cur.State == jobs.Pending || cur.State == jobs.Suspended {
			cur.Reason = s.reason
		}
		cur.Planner = keepFinish(cur.Planner, ps)
		return append(slices.Clone(events), recordDeadline(cur, s.dl, p.now)...), nil
	})
	if err != nil {
		if errors.Is(err, jobs.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("record workers of %s: %w", s.job.ID, err)
	}
	s.tr.saved = p.now
	l.snap.put(got)
	return nil
}

// keepFinish is ps with what only finish writes (teardown, callback) taken
// from the record's current planner state.
func keepFinish(cur, ps *jobs.PlannerState) *jobs.PlannerState {
	out := ps.Clone()
	if cur != nil {
		out.TornDown, out.Callback, out.CallbackFence = cur.TornDown, cur.Callback, cur.CallbackFence
	}
	return out
}

// applyReplace stops the straggler Decide chose, if any; the cluster
// places a replacement.
func (l *Loop) applyReplace(ctx context.Context, w JobWriter, s scaleStep, p RoundPlan) error {
	j, t := s.job, s.target
	s.tr.slow = t.SlowRounds
	if t.Replace == "" {
		return nil
	}
	if err := l.holding(); err != nil {
		return err
	}
	if err := l.cluster.StopWorker(ctx, j.ID, t.Replace, t.ReplaceReason); err != nil {
		_, _ = w.AppendEvent(ctx, j.ID, jobs.Event{Time: p.now, Type: jobs.EventError,
			Message: fmt.Sprintf("straggler: replacing worker %s failed: %v", t.Replace, err)})
		return fmt.Errorf("replace straggler %s of %s: %w", t.Replace, j.ID, err)
	}
	s.tr.lastReplace = p.now
	l.log.Info("straggler replaced", "job", j.ID, "worker", t.Replace, "reason", t.ReplaceReason)
	ps := plannerState(j, s.tr)
	got, _, err := w.UpdateWith(ctx, j.ID, func(cur *jobs.Job) ([]jobs.Event, error) {
		cur.Planner = keepFinish(cur.Planner, ps)
		return []jobs.Event{{Time: p.now, Type: jobs.EventWorker, Message: t.ReplaceReason, Data: map[string]any{"worker": t.Replace}}}, nil
	})
	if err != nil {
		return fmt.Errorf("record straggler of %s: %w", j.ID, err)
	}
	l.snap.put(got)
	return nil
}
