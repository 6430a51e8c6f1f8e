package loop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/planner"
)

// Round is one snapshot -> Decide -> apply pass. It is idempotent: after a
// partial failure the next round converges. Outside Run it takes (or
// renews) the lease first.
func (l *Loop) Round(ctx context.Context) error {
	_, err := l.round(ctx)
	return err
}

// round returns, besides errors, when the next round is due at the latest
// (a cooldown ending, a job to settle; zero: the interval).
func (l *Loop) round(ctx context.Context) (time.Time, error) {
	w, err := l.writer(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if err := l.snap.refresh(ctx, l.store); err != nil {
		return time.Time{}, err
	}
	capa, err := l.cluster.Capacity(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("planner snapshot: capacity: %w", err)
	}
	l.hook("capacity")
	if err := l.holding(); err != nil {
		return time.Time{}, err
	}
	var errs []error
	// Jobs that ended: tear them down and send their callback, once, even
	// if another planner saw them end.
	finished, err := l.store.Finished(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, j := range finished {
		l.snap.remove(j.ID)
		errs = append(errs, l.finish(ctx, w, j))
	}
	now := l.cfg.Now()
	dt := 0.0
	if !l.last.IsZero() {
		dt = now.Sub(l.last).Seconds()
	}
	l.last = now
	snap := planner.Snapshot{Capacity: capa, Config: l.cfg.Policy}
	if l.cfg.Tenants != nil {
		snap.Tenants = l.cfg.Tenants()
	}
	var next time.Time
	var schedulable []*jobs.Job
	liveByJob := map[string][]jobs.Worker{}
	for _, j := range l.snap.list() {
		tr := l.tracked(j)
		var ws []jobs.Worker
		if l.mayHaveWorkers(j, tr) {
			if ws, err = l.cluster.Workers(ctx, j.ID); err != nil {
				errs = append(errs, fmt.Errorf("workers of %s: %w", j.ID, err))
				continue
			}
		}
		live := liveWorkers(ws)
		liveByJob[j.ID] = live
		if j.State == jobs.Cancelling {
			errs = append(errs, l.cancel(ctx, w, j))
			continue
		}
		if due, err := l.settle(ctx, w, j, ws, tr, now); err != nil {
			errs = append(errs, err)
		} else if !due.IsZero() || !tr.exitedSince.IsZero() {
			// Every worker has exited: settled now, or to be settled at
			// due unless one comes back. Nothing to scale meanwhile.
			if !due.IsZero() && (next.IsZero() || due.Before(next)) {
				next = due
			}
			continue
		}
		schedulable = append(schedulable, j)
		units := max(j.Spec.GPUsPerWorker, 1)
		tr.attained += dt * float64(len(live)*units)
		if p := j.Progress; p.WorldSize > 0 && p.SamplesPerS > 0 && p.WorldSize == len(live) {
			tr.throughput[p.WorldSize] = p.SamplesPerS
		}
		js := jobState(j, live, tr)
		if j.State == jobs.Running && l.cfg.Speeds != nil && l.cfg.Policy.Straggler.Factor > 0 {
			js.Speeds = l.speeds(ctx, j.ID, live)
		}
		snap.Jobs = append(snap.Jobs, js)
	}
	decideStart := time.Now()
	plan := planner.Decide(snap, now)
	if l.cfg.OnDecide != nil {
		l.cfg.OnDecide(time.Since(decideStart))
	}
	if !plan.Recheck.IsZero() && (next.IsZero() || plan.Recheck.Before(next)) {
		next = plan.Recheck
	}
	for i, j := range schedulable {
		if err := l.holding(); err != nil {
			errs = append(errs, err)
			break
		}
		t := plan.Targets[i]
		errs = append(errs, l.apply(ctx, w, j, t, liveByJob[j.ID], now))
		errs = append(errs, l.replace(ctx, w, j, t, now))
	}
	l.rounds.Add(1)
	return next, errors.Join(errs...)
}

// tracked returns the memory kept about j, seeded from its record when this
// planner first sees it (after a restart or a takeover).
func (l *Loop) tracked(j *jobs.Job) *tracked {
	tr := l.track[j.ID]
	if tr == nil {
		tr = &tracked{throughput: map[int]float64{}}
		if p := j.Planner; p != nil {
			tr.attained, tr.lastResize, tr.lastReplace = p.AttainedGPUSeconds, p.LastResize, p.LastReplace
			maps.Copy(tr.throughput, p.Throughput)
		}
		tr.saved = l.cfg.Now()
		l.track[j.ID] = tr
	}
	return tr
}

// mayHaveWorkers says whether the cluster must be asked for j's workers:
// always the first time this planner sees it (a predecessor may have placed
// some), then only while it has, or is meant to have, workers. Queued jobs
// cost no cluster call.
func (l *Loop) mayHaveWorkers(j *jobs.Job, tr *tracked) bool {
	if j.State == jobs.Starting || j.State == jobs.Running || j.State == jobs.Cancelling ||
		j.Workers.Current > 0 || j.Workers.Target > 0 || !tr.exitedSince.IsZero() {
		return true
	}
	if _, seen := l.listed[j.ID]; !seen {
		l.listed[j.ID] = struct{}{}
		return true
	}
	return false
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

func jobState(j *jobs.Job, live []jobs.Worker, tr *tracked) planner.JobState {
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
		Target:      j.Workers.Target,
		Pinned:      j.Workers.Pinned,
		Throughput:  tr.throughput,
		LastResize:  tr.lastResize,
		SlowRounds:  tr.slow,
		LastReplace: tr.lastReplace,
		Deadline:    planner.DeadlineOf(*j, j.Workers.Target),
	}
}

// plannerState is what the record should say about j now.
func (l *Loop) plannerState(j *jobs.Job, tr *tracked) *jobs.PlannerState {
	ps := j.Planner.Clone()
	if ps == nil {
		ps = &jobs.PlannerState{}
	}
	ps.AttainedGPUSeconds = tr.attained
	ps.Throughput = maps.Clone(tr.throughput)
	if len(ps.Throughput) == 0 {
		ps.Throughput = nil
	}
	ps.LastResize, ps.LastReplace = tr.lastResize, tr.lastReplace
	return ps
}

// stateDue says whether the record's planner state is behind in a way a
// successor would notice: a resize, a replacement, new throughput, or
// attained service not saved for SaveEvery.
func (l *Loop) stateDue(j *jobs.Job, tr *tracked, now time.Time) bool {
	p := j.Planner
	if p == nil {
		p = &jobs.PlannerState{}
	}
	if !p.LastResize.Equal(tr.lastResize) || !p.LastReplace.Equal(tr.lastReplace) || !maps.Equal(p.Throughput, tr.throughput) {
		return true
	}
	return tr.attained != p.AttainedGPUSeconds && now.Sub(tr.saved) >= l.cfg.SaveEvery
}

// apply makes one job's target so: scale the cluster, move the job's state,
// and record the decision as an event.
func (l *Loop) apply(ctx context.Context, w *jobstore.Store, j *jobs.Job, t planner.Target, live []jobs.Worker, now time.Time) error {
	prev := j.Workers.Target
	tr := l.tracked(j)
	if t.Workers > 0 && (j.State == jobs.Pending || j.State == jobs.Suspended) {
		if _, err := w.Transition(ctx, j.ID, jobs.Starting, t.Reason); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
			return fmt.Errorf("start %s: %w", j.ID, err)
		}
	}
	if err := l.holding(); err != nil {
		return err
	}
	// A drain moves the job stop-free: grow elsewhere first, then let the
	// drained workers leave gracefully (planner.PlanDrain); the recorded
	// target stays t.Workers.
	count := t.Workers
	if dp := planner.PlanDrain(t, live); dp.Reason != "" {
		t.Reason, count = dp.Reason, dp.Count
		for _, id := range dp.Remove {
			if err := l.cluster.StopWorker(ctx, j.ID, id, t.Reason); err != nil {
				_, _ = w.AppendEvent(ctx, j.ID, jobs.Event{Time: now, Type: jobs.EventError, Message: fmt.Sprintf("move worker %s off its draining node: %v", id, err)})
			}
		}
	}
	if t.Workers == 0 && prev == 0 && len(live) == 0 {
		// Never placed: nothing to scale, and registering an empty job
		// with the cluster would only add noise.
	} else if err := l.cluster.Scale(ctx, *j, count, t.Reason); err != nil {
		_, _ = w.AppendEvent(ctx, j.ID, jobs.Event{Time: now, Type: jobs.EventError, Message: fmt.Sprintf("scale to %d failed: %v", t.Workers, err)})
		return fmt.Errorf("scale %s to %d: %w", j.ID, t.Workers, err)
	}
	var events []jobs.Event
	if t.Workers != prev {
		tr.lastResize = now
		l.log.Info("scale", "job", j.ID, "from", prev, "to", t.Workers, "reason", t.Reason)
		events = append(events, jobs.Event{Time: now, Type: jobs.EventScale, Message: t.Reason,
			Data: map[string]any{"from": prev, "to": t.Workers}})
	}
	if t.Workers == 0 && (j.State == jobs.Starting || j.State == jobs.Running) {
		if _, err := w.Transition(ctx, j.ID, jobs.Suspended, t.Reason); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
			return fmt.Errorf("suspend %s: %w", j.ID, err)
		}
	}
	reason := j.Reason
	if t.Workers == 0 && (j.State == jobs.Pending || j.State == jobs.Suspended) {
		reason = t.Reason
	}
	if j.Workers.Current == len(live) && j.Workers.Target == t.Workers && j.Reason == reason && len(events) == 0 && !l.stateDue(j, tr, now) {
		return nil
	}
	ps := l.plannerState(j, tr)
	got, _, err := w.UpdateWith(ctx, j.ID, func(cur *jobs.Job) ([]jobs.Event, error) {
		cur.Workers.Current, cur.Workers.Target = len(live), t.Workers
		if cur.State == jobs.Pending || cur.State == jobs.Suspended {
			cur.Reason = reason
		}
		keep := cur.Planner.Clone()
		cur.Planner = ps.Clone()
		if keep != nil { // what only finish writes
			cur.Planner.TornDown, cur.Planner.Callback, cur.Planner.CallbackFence = keep.TornDown, keep.Callback, keep.CallbackFence
		}
		return events, nil
	})
	if err != nil {
		if errors.Is(err, jobs.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("record workers of %s: %w", j.ID, err)
	}
	tr.saved = now
	l.snap.put(got)
	return nil
}

// cancel tears a cancelling job down and marks it cancelled once its
// workers are gone; its callback follows from the finished queue.
func (l *Loop) cancel(ctx context.Context, w *jobstore.Store, j *jobs.Job) error {
	if err := l.holding(); err != nil {
		return err
	}
	if err := l.cluster.Teardown(ctx, j.ID); err != nil {
		return fmt.Errorf("cancel %s: teardown: %w", j.ID, err)
	}
	ws, err := l.cluster.Workers(ctx, j.ID)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", j.ID, err)
	}
	for _, wk := range ws {
		if wk.State.Live() {
			return nil // next round
		}
	}
	tr := l.tracked(j)
	ps := l.plannerState(j, tr)
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
	l.mu.Lock()
	l.again = true // its callback: next round, from the finished queue
	l.mu.Unlock()
	return nil
}

// settle ends a starting or running job whose workers have all exited (0
// or not) for SettleAfter: succeeded if its training reached its end,
// failed otherwise, with the exit codes in the reason. While it waits it
// returns when the job is due; once settled tr.exitedSince stays set and
// due is zero; a job with a live worker gets zero and tr.exitedSince
// cleared.
func (l *Loop) settle(ctx context.Context, w *jobstore.Store, j *jobs.Job, ws []jobs.Worker, tr *tracked, now time.Time) (time.Time, error) {
	if (j.State != jobs.Starting && j.State != jobs.Running) || len(ws) == 0 || len(liveWorkers(ws)) > 0 || anyStopping(ws) {
		tr.exitedSince = time.Time{}
		return time.Time{}, nil
	}
	if tr.exitedSince.IsZero() {
		tr.exitedSince = now
	}
	if due := tr.exitedSince.Add(l.cfg.SettleAfter); now.Before(due) {
		return due, nil
	}
	if err := l.holding(); err != nil {
		return time.Time{}, err
	}
	reached := j.Progress.TotalEpochs > 0 && j.Progress.Epoch >= j.Progress.TotalEpochs
	if l.cfg.Done != nil {
		st, err := l.cfg.Done.JobDone(ctx, j.ID)
		if err != nil {
			return time.Time{}, fmt.Errorf("settle %s: %w", j.ID, err)
		}
		if st == jobs.Succeeded {
			reached = true
		}
	}
	codes := exitCodes(ws)
	to, reason := jobs.Failed, fmt.Sprintf("all %d workers exited before the job finished (exit codes %s)", len(ws), codes)
	if reached {
		to, reason = jobs.Succeeded, fmt.Sprintf("training finished; all %d workers exited (exit codes %s)", len(ws), codes)
	}
	ps := l.plannerState(j, tr)
	if j.State == jobs.Starting && to == jobs.Succeeded {
		// starting -> succeeded is no transition: the job did run.
		if _, err := w.Transition(ctx, j.ID, jobs.Running, "its workers ran"); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
			return time.Time{}, fmt.Errorf("settle %s: %w", j.ID, err)
		}
	}
	_, err := w.Update(ctx, j.ID, func(cur *jobs.Job) error {
		if !jobs.CanTransition(cur.State, to) {
			return &jobs.TransitionError{From: cur.State, To: to}
		}
		cur.State, cur.Reason = to, reason
		cur.Workers.Current = 0
		cur.Planner = ps
		return nil
	})
	if errors.Is(err, jobs.ErrInvalidTransition) {
		return time.Time{}, nil // somebody else moved it; the snapshot catches up
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("settle %s: %w", j.ID, err)
	}
	l.log.Info("settled a job whose workers all exited", "job", j.ID, "state", to, "reason", reason)
	l.snap.remove(j.ID)
	l.mu.Lock()
	l.again = true
	l.mu.Unlock()
	return time.Time{}, nil
}

func anyStopping(ws []jobs.Worker) bool {
	for _, w := range ws {
		if w.State == jobs.WorkerStopping {
			return true
		}
	}
	return false
}

// exitCodes is "0, 0, 137" in worker order; a worker whose code the cluster
// does not know shows its state.
func exitCodes(ws []jobs.Worker) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		if w.ExitCode != nil {
			parts[i] = strconv.Itoa(*w.ExitCode)
		} else {
			parts[i] = string(w.State)
		}
	}
	return strings.Join(parts, ", ")
}

// finish cleans up a terminal job: teardown once, then the callback once;
// each step is recorded (fenced) on the job before the next, so a planner
// taking over carries on from there.
func (l *Loop) finish(ctx context.Context, w *jobstore.Store, j jobs.Job) error {
	delete(l.track, j.ID)
	ps := j.Planner.Clone()
	if ps == nil {
		ps = &jobs.PlannerState{}
	}
	if !ps.TornDown {
		if err := l.holding(); err != nil {
			return err
		}
		if err := l.cluster.Teardown(ctx, j.ID); err != nil {
			return fmt.Errorf("teardown %s: %w", j.ID, err)
		}
		ps.TornDown = true
		l.log.Info("torn down", "job", j.ID, "state", j.State)
	}
	claim := false
	switch {
	case j.Spec.CallbackURL == "" || ps.Callback == "delivered" || ps.Callback == "failed":
		ps.Finished = true
	case ps.Callback == "sending" && ps.CallbackFence == l.fence && l.isSending(j.ID):
		return nil // in flight from here
	default:
		// Not sent yet, or claimed by a planner that is gone.
		ps.Callback, ps.CallbackFence, claim = "sending", l.fence, true
	}
	got, err := w.Update(ctx, j.ID, func(cur *jobs.Job) error {
		cur.Planner = ps.Clone()
		if ps.TornDown { // a finished job holds no workers
			cur.Workers.Current, cur.Workers.Target = 0, 0
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish %s: %w", j.ID, err)
	}
	if claim {
		l.send(ctx, w, got)
	}
	return nil
}

func (l *Loop) isSending(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sending[id]
}

// send delivers j's callback in the background and records the outcome
// (only its class) as a job event; the job then leaves the finished queue.
func (l *Loop) send(ctx context.Context, w *jobstore.Store, j jobs.Job) {
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

// replace stops the straggler Decide chose, if any; the cluster places a
// replacement.
func (l *Loop) replace(ctx context.Context, w *jobstore.Store, j *jobs.Job, t planner.Target, now time.Time) error {
	tr := l.tracked(j)
	tr.slow = t.SlowRounds
	if t.Replace == "" {
		return nil
	}
	if err := l.holding(); err != nil {
		return err
	}
	if err := l.cluster.StopWorker(ctx, j.ID, t.Replace, t.ReplaceReason); err != nil {
		_, _ = w.AppendEvent(ctx, j.ID, jobs.Event{Time: now, Type: jobs.EventError,
			Message: fmt.Sprintf("straggler: replacing worker %s failed: %v", t.Replace, err)})
		return fmt.Errorf("replace straggler %s of %s: %w", t.Replace, j.ID, err)
	}
	tr.lastReplace = now
	l.log.Info("straggler replaced", "job", j.ID, "worker", t.Replace, "reason", t.ReplaceReason)
	ps := l.plannerState(j, tr)
	got, _, err := w.UpdateWith(ctx, j.ID, func(cur *jobs.Job) ([]jobs.Event, error) {
		keep := cur.Planner.Clone()
		cur.Planner = ps.Clone()
		if keep != nil {
			cur.Planner.TornDown, cur.Planner.Callback, cur.Planner.CallbackFence = keep.TornDown, keep.Callback, keep.CallbackFence
		}
		return []jobs.Event{{Time: now, Type: jobs.EventWorker, Message: t.ReplaceReason, Data: map[string]any{"worker": t.Replace}}}, nil
	})
	if err != nil {
		return fmt.Errorf("record straggler of %s: %w", j.ID, err)
	}
	l.snap.put(got)
	return nil
}

// speeds lists j's running workers with what each last published.
func (l *Loop) speeds(ctx context.Context, jobID string, live []jobs.Worker) []planner.WorkerSpeed {
	var running []string
	for _, w := range live {
		if w.State == jobs.WorkerRunning {
			running = append(running, w.ID)
		}
	}
	if len(running) < 3 {
		return nil
	}
	figs, err := l.cfg.Speeds.StepTimes(ctx, jobID)
	if err != nil {
		// Not fatal for the round; no replacement this time.
		l.log.Warn("read worker step times", "job", jobID, "err", err)
		return nil
	}
	slices.Sort(running)
	out := make([]planner.WorkerSpeed, 0, len(running))
	for _, id := range running {
		f, ok := figs[id]
		if !ok {
			f = planner.WorkerSpeed{}
		}
		f.ID = id
		out = append(out, f)
	}
	return out
}
