package planner

import (
	"math"
	"slices"
	"time"
)

// EstimateMoveRatio is how far (as a share) a deadline job's speed at its
// size may move from what the planner assumed before it is re-planned from
// its least share (Replan): measurements jitter by a few per cent.
const EstimateMoveRatio = 0.15

// SpeedAt is the speed PlanDeadlines assumes for a job at n workers, from
// its measurements, its prior one-worker speed and the communication ratio
// (the same rule: measured, interpolated, the fitted scaling model, the
// prior); 0 when nothing is known.
func SpeedAt(measured map[int]float64, prior, commRatio float64, n int) float64 {
	return throughputAt(measured, prior, commRatio, n)
}

// EstimateMoved reports whether a speed measured now moved materially
// (more than EstimateMoveRatio) from the one assumed before; an estimate of
// 0 (nothing known) moves with any measurement.
func EstimateMoved(assumed, measured float64) bool {
	if measured <= 0 || math.IsNaN(measured) || math.IsInf(measured, 0) {
		return false
	}
	return assumed <= 0 || math.Abs(measured-assumed) > EstimateMoveRatio*assumed
}

// DeadlineMargin is how much time before its deadline a plan must leave
// for it to count as clearly in time: 10 s, or a tenth of the time left.
// Speed estimates jitter, and on a loaded machine they drift by more than
// EstimateMoveRatio within a minute: a job is shrunk by Replan only to a
// share that finishes this much early, and the planner loop clears a job's
// at-risk flag only when its plan is back by this much.
func DeadlineMargin(due, now time.Time) time.Duration {
	return max(10*time.Second, due.Sub(now)/10)
}

// Replan plans the deadline jobs in moved (their speed estimate moved,
// EstimateMoved) again from their least share: it returns s with their
// share floors lowered when PlanDeadlines then still finishes in time every
// strict job it finished with the floors, and whether it did; otherwise s
// unchanged. A job that got faster may so shrink to the share it needs now
// and give the rest back, without any strict job losing its plan. It
// shrinks only as far as a share that still finishes DeadlineMargin before
// its deadline (a share that would finish just in time leaves nothing for
// the next estimate that is slower), and not at all when none does.
func Replan(s Snapshot, moved []string, now time.Time) (Snapshot, bool) {
	t := s
	t.Jobs = slices.Clone(s.Jobs)
	var cleared []int
	for i := range t.Jobs {
		j := &t.Jobs[i]
		if j.Deadline == nil || j.Deadline.Share == 0 || !slices.Contains(moved, j.ID) {
			continue
		}
		d := *j.Deadline
		d.Share = 0
		j.Deadline = &d
		cleared = append(cleared, i)
	}
	if len(cleared) == 0 {
		return s, false
	}
	// In PlanDeadlines' order: a job's margin is judged in what the jobs
	// planned before it leave, with their floors already lowered.
	slices.SortStableFunc(cleared, func(a, b int) int { return planOrder(&t.Jobs[a], &t.Jobs[b]) })
	lowered := false
	for _, i := range cleared {
		j := &t.Jobs[i]
		floor := s.Jobs[i].Deadline.Share
		by := j.Deadline.At.Add(-DeadlineMargin(j.Deadline.At, now))
		share := floor
		for f := 0; f < floor; f++ {
			j.Deadline.Share = f
			tg, _ := PlanDeadlines(t, now).Target(j.ID)
			if tg.Share >= floor {
				break
			}
			if tg.Feasible && !tg.Finish.After(by) {
				share = f
				break
			}
		}
		j.Deadline.Share = share
		lowered = lowered || share < floor
	}
	if !lowered {
		return s, false
	}
	before, after := PlanDeadlines(s, now), PlanDeadlines(t, now)
	for i, b := range before.Targets {
		if b.Feasible && !after.Targets[i].Feasible && !s.Jobs[jobIndex(s.Jobs, b.JobID)].Deadline.BestEffort {
			return s, false
		}
	}
	return t, true
}
