package loop

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// RoundPlan is everything one round will do, decided from its world
// without I/O (decideRound): Apply carries it out. Each step is written so
// that doing it twice, or after a successor did part of it, changes
// nothing more: a round that fails part-way is not patched, the next one
// reads again and plans again.
type RoundPlan struct {
	now time.Time
	// finish: terminal jobs to tear down and call back.
	finish []finishStep
	// cancel: cancelling jobs to tear down, then mark cancelled.
	cancel []cancelStep
	// settle: jobs whose workers all exited, to end succeeded or failed.
	settle []settleStep
	// scale: every job the policy planned, in Decide's order.
	scale []scaleStep
	// next is when the next round is due at the latest (a cooldown
	// ending, a job to settle; zero: the interval).
	next time.Time
}

// decideRound turns a world into a plan: a pure function of its arguments.
func decideRound(w world, cfg Config, fence int64) RoundPlan {
	p := RoundPlan{now: w.now}
	for _, j := range w.finished {
		p.finish = append(p.finish, decideFinish(j, fence, w.sending[j.ID]))
	}
	snap := planner.Snapshot{Capacity: w.capacity, Config: cfg.Policy, Tenants: w.tenants}
	var planned []observed
	for _, o := range w.jobs {
		switch {
		case o.job.State == jobs.Cancelling:
			p.cancel = append(p.cancel, cancelStep{job: o.job, state: plannerState(o.job, o.tr)})
		case !o.tr.exitedSince.IsZero():
			// Every worker has exited: settled now, or at due unless one
			// comes back. Nothing to scale meanwhile.
			s := decideSettle(o, cfg.SettleAfter, w.now)
			if s.to == "" {
				p.next = earliest(p.next, s.due)
				continue
			}
			p.settle = append(p.settle, s)
		default:
			planned = append(planned, o)
			snap.Jobs = append(snap.Jobs, jobState(o))
		}
	}
	snap.Service = serviceHistory(w.service, planned)
	snap, replanned := replanMoved(snap, planned, w.now)
	plan := planner.Decide(snap, w.now)
	p.next = earliest(p.next, plan.Recheck)
	for i, o := range planned {
		s := decideScale(o, plan.Targets[i], w.now, cfg.SaveEvery)
		p.scale = append(p.scale, withDeadline(s, o, replanned, w.now))
	}
	return p
}

// serviceHistory is what Decide ranks the planned jobs by: the finished
// jobs' service with the planned jobs' attained service as censored
// observations (they need at least that), or nil (least attained service
// first) while fewer than planner.MinServiceHistory jobs have succeeded.
func serviceHistory(finished []float64, planned []observed) *planner.ServiceHistory {
	if len(finished) < planner.MinServiceHistory {
		return nil
	}
	live := make([]float64, len(planned))
	for i, o := range planned {
		live[i] = o.tr.attained
	}
	h, err := planner.NewServiceHistory(finished, live)
	if err != nil {
		// The store returns positive finite values and attained service
		// only grows from zero: not reached; rank without a history.
		return nil
	}
	return h
}

// earliest is the sooner of two due times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func jobState(o observed) planner.JobState {
	j, tr := o.job, o.tr
	place := map[string]int{}
	for _, w := range o.live {
		place[w.Node]++
	}
	return planner.JobState{
		ID: j.ID, Tenant: j.Tenant,
		Min: j.Spec.Workers.Min, Max: j.Spec.Workers.Max,
		GPUsPerWorker: j.Spec.GPUsPerWorker, GPU: j.Spec.GPU,
		Priority: j.Spec.Priority, SubmittedAt: j.CreatedAt,
		AttainedGPUSeconds: tr.attained,
		Current:            len(o.live), Placement: place,
		Target:      j.Workers.Target,
		Pinned:      j.Workers.Pinned,
		Throughput:  tr.throughput,
		LastResize:  tr.lastResize,
		SlowRounds:  tr.slow,
		LastReplace: tr.lastReplace,
		Speeds:      o.speeds,
		Deadline:    planner.DeadlineOf(*j, j.Workers.Target),
	}
}

// plannerState is what the record should say about j given the loop's
// memory of it.
func plannerState(j *jobs.Job, tr *tracked) *jobs.PlannerState {
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
// attained service not saved for saveEvery.
func stateDue(j *jobs.Job, tr *tracked, now time.Time, saveEvery time.Duration) bool {
	p := j.Planner
	if p == nil {
		p = &jobs.PlannerState{}
	}
	if !p.LastResize.Equal(tr.lastResize) || !p.LastReplace.Equal(tr.lastReplace) || !maps.Equal(p.Throughput, tr.throughput) {
		return true
	}
	return tr.attained != p.AttainedGPUSeconds && now.Sub(tr.saved) >= saveEvery
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

// settleStep ends a job whose workers all exited for SettleAfter; while it
// waits, to is empty and due is when it will be settled.
type settleStep struct {
	job    *jobs.Job
	due    time.Time
	to     jobs.State
	reason string
	// viaRunning: starting -> succeeded is no transition, so the job
	// (which did run) moves to running first.
	viaRunning bool
	state      *jobs.PlannerState
}

// decideSettle: succeeded if the training reached its end (the done marker,
// or progress at its last epoch), failed otherwise, with the exit codes in
// the reason.
func decideSettle(o observed, settleAfter time.Duration, now time.Time) settleStep {
	j := o.job
	if due := o.tr.exitedSince.Add(settleAfter); now.Before(due) {
		return settleStep{job: j, due: due}
	}
	reached := o.done || (j.Progress.TotalEpochs > 0 && j.Progress.Epoch >= j.Progress.TotalEpochs)
	codes := exitCodes(o.workers)
	s := settleStep{job: j, to: jobs.Failed, state: plannerState(j, o.tr),
		reason: fmt.Sprintf("all %d workers exited before the job finished (exit codes %s)", len(o.workers), codes)}
	if reached {
		s.to, s.reason = jobs.Succeeded, fmt.Sprintf("training finished; all %d workers exited (exit codes %s)", len(o.workers), codes)
		s.viaRunning = j.State == jobs.Starting
	}
	return s
}

// cancelStep tears a cancelling job down; once its workers are gone
// (cancelDone) it is marked cancelled, its callback following from the
// finished queue.
type cancelStep struct {
	job   *jobs.Job
	state *jobs.PlannerState
}

// cancelDone says whether a torn-down job's workers are all gone.
func cancelDone(ws []jobs.Worker) bool {
	for _, w := range ws {
		if w.State.Live() {
			return false
		}
	}
	return true
}
