package loop

import (
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// finishStep cleans up a terminal job: teardown once, then the callback
// once, each recorded (fenced) on the job before the next, so a planner
// taking over carries on from there.
type finishStep struct {
	job      jobs.Job
	teardown bool
	// state is what the record says once the step is done (torn down,
	// the callback claimed or finished).
	state *jobs.PlannerState
	// inFlight: the callback is being sent from this planner; nothing to
	// record. claim: send it after recording the claim.
	inFlight, claim bool
}

func decideFinish(j jobs.Job, fence int64, sendingHere bool) finishStep {
	ps := j.Planner.Clone()
	if ps == nil {
		ps = &jobs.PlannerState{}
	}
	s := finishStep{job: j, teardown: !ps.TornDown, state: ps}
	ps.TornDown = true
	switch {
	case j.Spec.CallbackURL == "" || ps.Callback == "delivered" || ps.Callback == "failed":
		ps.Finished = true
	case ps.Callback == "sending" && ps.CallbackFence == fence && sendingHere:
		s.inFlight = true
	default:
		// Not sent yet, or claimed by a planner that is gone.
		ps.Callback, ps.CallbackFence, s.claim = "sending", fence, true
	}
	return s
}

// scaleStep makes one job's target so: start it, drain it off a node,
// scale the cluster, suspend it, replace a straggler, record it.
type scaleStep struct {
	job *jobs.Job
	tr  *tracked
	// target is Decide's; a drain rewrites its Reason. count is what the
	// cluster is asked for (a drain grows elsewhere first).
	target planner.Target
	count  int
	// start: pending or suspended -> starting; suspend: -> suspended.
	start, suspend bool
	// drain: workers to stop gracefully off draining nodes.
	drain []string
	// scale: ask the cluster (not for a job never placed, which would
	// only register an empty job).
	scale bool
	// resized: the target changed, an event and a cooldown.
	resized bool
	live    int
	// reason is what the record of a queued job says.
	reason string
	// record: the record is behind (workers, target, reason, planner
	// state, a deadline job's estimate); a resize always records.
	record bool
	// dl is a deadline job's estimate to record (deadline.go).
	dl *deadlineEstimate
}

func decideScale(o observed, t planner.Target, now time.Time, saveEvery time.Duration) scaleStep {
	j := o.job
	prev := j.Workers.Target
	s := scaleStep{job: j, tr: o.tr, target: t, count: t.Workers, live: len(o.live),
		start:   t.Workers > 0 && (j.State == jobs.Pending || j.State == jobs.Suspended),
		suspend: t.Workers == 0 && (j.State == jobs.Starting || j.State == jobs.Running),
		scale:   !(t.Workers == 0 && prev == 0 && len(o.live) == 0),
		resized: t.Workers != prev,
		reason:  j.Reason,
	}
	if dp := planner.PlanDrain(t, o.live); dp.Reason != "" {
		s.target.Reason, s.count, s.drain = dp.Reason, dp.Count, dp.Remove
	}
	if t.Workers == 0 && (j.State == jobs.Pending || j.State == jobs.Suspended) {
		s.reason = s.target.Reason
	}
	s.record = s.resized || j.Workers.Current != s.live || j.Workers.Target != t.Workers || j.Reason != s.reason ||
		stateDue(j, o.tr, now, saveEvery)
	return s
}
