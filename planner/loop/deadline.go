package loop

import (
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

// finishTolerance is how far a deadline job's expected finish may move
// before its record is written again (estimates jitter every round).
const finishTolerance = 5 * time.Second

// deadlineEstimate is what the record of a deadline job says about its
// plan: when it is expected to finish (zero: never, at its plan) and
// whether that is after its deadline.
type deadlineEstimate struct {
	finish time.Time
	atRisk bool
	reason string
}

// replanMoved clears the share floor of the deadline jobs whose speed
// estimate moved this round when that keeps every strict plan in time
// (planner.Replan); replanned names those it cleared.
func replanMoved(snap planner.Snapshot, planned []observed, now time.Time) (planner.Snapshot, map[string]bool) {
	var moved []string
	for _, o := range planned {
		if o.moved != "" {
			moved = append(moved, o.job.ID)
		}
	}
	if len(moved) == 0 {
		return snap, nil
	}
	snap, ok := planner.Replan(snap, moved, now)
	if !ok {
		return snap, nil
	}
	out := map[string]bool{}
	for _, id := range moved {
		out[id] = true
	}
	return snap, out
}

// withDeadline adds a deadline job's estimate to its scale step: recorded
// when the record's is missing, changes at_risk, or moved by more than
// finishTolerance; a re-plan after a moved estimate says so in the reason.
func withDeadline(s scaleStep, o observed, replanned map[string]bool, now time.Time) scaleStep {
	d := s.target.Deadline
	if d == nil {
		return s
	}
	e := &deadlineEstimate{finish: d.Finish.Truncate(time.Second), atRisk: !d.Feasible, reason: d.Reason}
	j := o.job
	if j.AtRisk && !e.atRisk && j.Deadline != nil && e.finish.After(j.Deadline.Add(-planner.DeadlineMargin(*j.Deadline, now))) {
		e.atRisk = true // not clearly back in time: no flapping
	}
	s.dl = e
	if o.moved != "" {
		how := "; kept its share"
		if replanned[o.job.ID] {
			how = "; re-planned from its least share"
		}
		s.target.Reason += " (" + o.moved + how + ")"
	}
	switch {
	case j.Deadline == nil, j.AtRisk != e.atRisk, (j.ExpectedFinish == nil) != e.finish.IsZero():
		s.record = true
	case j.ExpectedFinish != nil:
		diff := j.ExpectedFinish.Sub(e.finish)
		s.record = s.record || diff > finishTolerance || diff < -finishTolerance
	}
	return s
}

// recordDeadline writes e on the record cur, with a deadline_at_risk event
// when it crosses from in time to at risk (once per crossing: decided on
// the record as it is now).
func recordDeadline(cur *jobs.Job, e *deadlineEstimate, now time.Time) []jobs.Event {
	if e == nil || !cur.Spec.HasDeadline() {
		return nil
	}
	if cur.Deadline == nil {
		due := cur.Spec.DeadlineAt(cur.CreatedAt)
		cur.Deadline = &due
	}
	was := cur.AtRisk
	cur.AtRisk, cur.ExpectedFinish = e.atRisk, nil
	if !e.finish.IsZero() {
		f := e.finish.UTC()
		cur.ExpectedFinish = &f
	}
	if was || !e.atRisk {
		return nil
	}
	due := cur.Deadline.UTC()
	data := map[string]any{"deadline": due.Format(time.RFC3339)}
	msg := fmt.Sprintf("deadline at risk: %s", e.reason)
	if !e.finish.IsZero() {
		data["expected_finish"] = e.finish.UTC().Format(time.RFC3339)
		data["late_s"] = e.finish.Sub(due).Round(time.Second).Seconds()
	}
	return []jobs.Event{{Time: now, Type: jobs.EventDeadlineAtRisk, Message: msg, Data: data}}
}

// deadlineEnd is the event that says how a deadline job ended, for a job
// that just became terminal (nil for others, and for a cancelled job: the
// tenant withdrew it): met when it succeeded by its deadline, missed when
// it succeeded later or failed; end is when it ended (its record's last
// write before the planner's teardown). It clears the estimate.
func deadlineEnd(cur *jobs.Job, end, now time.Time) []jobs.Event {
	if !cur.Spec.HasDeadline() {
		return nil
	}
	due := cur.Spec.DeadlineAt(cur.CreatedAt)
	if cur.Deadline != nil {
		due = *cur.Deadline
	}
	cur.AtRisk, cur.ExpectedFinish = false, nil
	by := end.Sub(due).Round(time.Second)
	data := map[string]any{"deadline": due.UTC().Format(time.RFC3339), "finished": end.UTC().Format(time.RFC3339)}
	if cur.State == jobs.Succeeded || cur.State == jobs.Failed {
		// The record says what the event says, edl get and the
		// dashboard read it: the end time, not the teardown's write.
		cur.DeadlineResult = &jobs.DeadlineResult{Met: cur.State == jobs.Succeeded && by <= 0,
			Finished: end.UTC(), Failed: cur.State == jobs.Failed}
	}
	switch {
	case cur.State == jobs.Succeeded && by <= 0:
		data["early_s"] = -by.Seconds()
		return []jobs.Event{{Time: now, Type: jobs.EventDeadlineMet, Data: data,
			Message: fmt.Sprintf("deadline met: finished %s before it", -by)}}
	case cur.State == jobs.Succeeded:
		data["late_s"] = by.Seconds()
		return []jobs.Event{{Time: now, Type: jobs.EventDeadlineMissed, Data: data,
			Message: fmt.Sprintf("deadline missed: finished %s after it", by)}}
	case cur.State == jobs.Failed:
		data["failed"] = true
		return []jobs.Event{{Time: now, Type: jobs.EventDeadlineMissed, Data: data,
			Message: "deadline missed: the job failed"}}
	}
	return nil
}
