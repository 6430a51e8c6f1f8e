package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// Round is one snapshot -> Decide -> Apply pass. It is idempotent: after a
// partial failure the next round re-reads everything and converges.
func (l *Loop) Round(ctx context.Context) error {
	now := l.cfg.Now()
	active, err := l.store.ListActive(ctx)
	if err != nil {
		return fmt.Errorf("planner snapshot: %w", err)
	}
	capa, err := l.cluster.Capacity(ctx)
	if err != nil {
		return fmt.Errorf("planner snapshot: capacity: %w", err)
	}
	var errs []error
	seen := map[string]bool{}
	snap := planner.Snapshot{Capacity: capa, Config: l.cfg.Policy}
	if l.cfg.Tenants != nil {
		snap.Tenants = l.cfg.Tenants()
	}
	var schedulable []jobs.Job
	liveByJob := map[string][]jobs.Worker{}
	dt := 0.0
	if !l.last.IsZero() {
		dt = now.Sub(l.last).Seconds()
	}
	l.last = now
	for _, j := range active {
		seen[j.ID] = true
		ws, err := l.cluster.Workers(ctx, j.ID)
		if err != nil {
			errs = append(errs, fmt.Errorf("workers of %s: %w", j.ID, err))
			continue
		}
		live := liveWorkers(ws)
		liveByJob[j.ID] = live
		if j.State == jobs.Cancelling {
			errs = append(errs, l.cancel(ctx, j, live))
			continue
		}
		schedulable = append(schedulable, j)
		tr := l.tracked(j.ID)
		units := max(j.Spec.GPUsPerWorker, 1)
		tr.attained += dt * float64(len(live)*units)
		if p := j.Progress; p.WorldSize > 0 && p.SamplesPerS > 0 && p.WorldSize == len(live) {
			tr.throughput[p.WorldSize] = p.SamplesPerS
		}
		snap.Jobs = append(snap.Jobs, jobState(j, live, tr))
	}
	// Jobs that finished since the last round: take their workers away.
	for id := range l.managed {
		if !seen[id] {
			if err := l.cluster.Teardown(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("teardown %s: %w", id, err))
				continue
			}
			delete(l.managed, id)
			delete(l.track, id)
			if j, err := l.store.Get(ctx, id); err == nil && j.State.Terminal() {
				l.callback(ctx, j)
			}
		}
	}
	plan := planner.Decide(snap, now)
	for _, j := range schedulable {
		t, ok := plan.Target(j.ID)
		if !ok {
			continue
		}
		errs = append(errs, l.apply(ctx, j, t, liveByJob[j.ID], now))
		errs = append(errs, l.stragglers(ctx, j, liveByJob[j.ID], now))
	}
	l.rounds++
	return errors.Join(errs...)
}

func (l *Loop) tracked(id string) *tracked {
	tr := l.track[id]
	if tr == nil {
		tr = &tracked{throughput: map[int]float64{}}
		l.track[id] = tr
	}
	return tr
}

// liveWorkers are the workers that hold or will hold resources and are not
// on their way out.
func liveWorkers(ws []jobs.Worker) []jobs.Worker {
	var out []jobs.Worker
	for _, w := range ws {
		if w.State == jobs.WorkerPending || w.State == jobs.WorkerRunning {
			out = append(out, w)
		}
	}
	return out
}

func jobState(j jobs.Job, live []jobs.Worker, tr *tracked) planner.JobState {
	place := map[string]int{}
	for _, w := range live {
		place[w.Node]++
	}
	return planner.JobState{
		ID: j.ID, Tenant: j.Tenant,
		Min: j.Spec.Workers.Min, Max: j.Spec.Workers.Max,
		GPUsPerWorker: j.Spec.GPUsPerWorker, GPU: j.Spec.GPU,
		Priority: j.Spec.Priority, SubmittedAt: j.CreatedAt,
		AttainedGPUSeconds: tr.attained,
		Current:            len(live), Placement: place,
		Pinned:     j.Workers.Pinned,
		Throughput: tr.throughput,
		LastResize: tr.lastResize,
	}
}

// apply makes one job's target so: scale the cluster, move the job's state,
// and record the decision as an event.
func (l *Loop) apply(ctx context.Context, j jobs.Job, t planner.Target, live []jobs.Worker, now time.Time) error {
	prev := j.Workers.Target
	if t.Workers > 0 {
		if j.State == jobs.Pending || j.State == jobs.Suspended {
			if _, err := l.store.Transition(ctx, j.ID, jobs.Starting, t.Reason); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
				return fmt.Errorf("start %s: %w", j.ID, err)
			}
		}
		l.managed[j.ID] = true
	}
	if t.Workers == 0 && prev == 0 && len(live) == 0 {
		// Never placed: nothing to scale, and registering an empty job
		// with the cluster would only add noise.
	} else if err := l.cluster.Scale(ctx, j, t.Workers, t.Reason); err != nil {
		_, _ = l.store.AppendEvent(ctx, j.ID, jobs.Event{Time: now, Type: jobs.EventError, Message: fmt.Sprintf("scale to %d failed: %v", t.Workers, err)})
		return fmt.Errorf("scale %s to %d: %w", j.ID, t.Workers, err)
	}
	if t.Workers != prev {
		l.tracked(j.ID).lastResize = now
		l.log.Info("scale", "job", j.ID, "from", prev, "to", t.Workers, "reason", t.Reason)
		_, _ = l.store.AppendEvent(ctx, j.ID, jobs.Event{Time: now, Type: jobs.EventScale, Message: t.Reason,
			Data: map[string]any{"from": prev, "to": t.Workers}})
	}
	if t.Workers == 0 && (j.State == jobs.Starting || j.State == jobs.Running) {
		if _, err := l.store.Transition(ctx, j.ID, jobs.Suspended, t.Reason); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
			return fmt.Errorf("suspend %s: %w", j.ID, err)
		}
	}
	reason := j.Reason
	if t.Workers == 0 && (j.State == jobs.Pending || j.State == jobs.Suspended) {
		reason = t.Reason
	}
	if j.Workers.Current != len(live) || j.Workers.Target != t.Workers || j.Reason != reason {
		_, err := l.store.Update(ctx, j.ID, func(cur *jobs.Job) error {
			cur.Workers.Current, cur.Workers.Target = len(live), t.Workers
			if cur.State == jobs.Pending || cur.State == jobs.Suspended {
				cur.Reason = reason
			}
			return nil
		})
		if err != nil && !errors.Is(err, jobs.ErrNotFound) {
			return fmt.Errorf("record workers of %s: %w", j.ID, err)
		}
	}
	return nil
}

// cancel tears a cancelling job down and marks it cancelled once its
// workers are gone.
func (l *Loop) cancel(ctx context.Context, j jobs.Job, live []jobs.Worker) error {
	if err := l.cluster.Teardown(ctx, j.ID); err != nil {
		return fmt.Errorf("cancel %s: teardown: %w", j.ID, err)
	}
	ws, err := l.cluster.Workers(ctx, j.ID)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", j.ID, err)
	}
	for _, w := range ws {
		if w.State.Live() {
			return nil // next round
		}
	}
	if _, err := l.store.Update(ctx, j.ID, func(cur *jobs.Job) error {
		cur.Workers.Current, cur.Workers.Target = 0, 0
		return nil
	}); err != nil {
		return fmt.Errorf("cancel %s: %w", j.ID, err)
	}
	if _, err := l.store.Transition(ctx, j.ID, jobs.Cancelled, "cancelled by tenant; all workers gone"); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
		return fmt.Errorf("cancel %s: %w", j.ID, err)
	}
	delete(l.managed, j.ID)
	delete(l.track, j.ID)
	l.log.Info("cancelled", "job", j.ID)
	if cur, err := l.store.Get(ctx, j.ID); err == nil {
		l.callback(ctx, cur)
	}
	return nil
}

// callback calls the job's callback_url, if any, in the background, and
// records the outcome as a job event.
func (l *Loop) callback(ctx context.Context, j jobs.Job) {
	if j.Spec.CallbackURL == "" || l.callbacks == nil {
		return
	}
	go func() {
		err := l.callbacks.Notify(ctx, j)
		ev := jobs.Event{Time: l.cfg.Now(), Type: jobs.EventState, Message: "callback delivered to " + j.Spec.CallbackURL}
		if err != nil {
			ev.Type, ev.Message = jobs.EventError, err.Error()
		}
		_, _ = l.store.AppendEvent(context.WithoutCancel(ctx), j.ID, ev)
	}()
}
