package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// DeadlineTarget is the plan for one deadline job.
type DeadlineTarget struct {
	JobID string
	// Share is the worker count the job is planned at (its minimum
	// satisfactory share); 0 when it cannot be planned at all.
	Share int
	// Now is what the plan gives it now: Share, or less (0: it waits) while
	// jobs with earlier deadlines hold the GPUs.
	Now int
	// Finish is when the plan finishes it (zero: never).
	Finish time.Time
	// Feasible reports whether Finish is by the deadline.
	Feasible bool
	// Reason is one line for the event log.
	Reason string
}

// DeadlinePlan is PlanDeadlines' answer, in the snapshot's order of the
// deadline jobs.
type DeadlinePlan struct {
	Targets []DeadlineTarget
}

// Target returns the target of job id and whether there is one.
func (p DeadlinePlan) Target(id string) (DeadlineTarget, bool) {
	for _, t := range p.Targets {
		if t.JobID == id {
			return t, true
		}
	}
	return DeadlineTarget{}, false
}

// Admission is Admit's answer for one new deadline job.
type Admission struct {
	Admitted bool
	// AtRisk: admitted (best effort) without a plan that meets the deadline.
	AtRisk bool
	// Reason says why a job is refused or at risk.
	Reason string
	// Workers and ExpectedFinish are the job's plan (Workers 0: none).
	Workers        int
	ExpectedFinish time.Time
	// EarliestFeasible, for a refused job, is the earliest deadline that
	// would be admitted now (zero: none found, e.g. nothing is known about
	// its speed).
	EarliestFeasible time.Time
}

// PlanDeadlines plans the snapshot's deadline jobs alone, as if nothing
// else ran (they come before every other job): strict jobs in
// earliest-deadline-first order, then best-effort ones, each at the least
// worker count that finishes it by its deadline in what the jobs before it
// leave (ElasticFlow's minimum satisfactory share), and never less than its
// last Share. Where fewer GPUs are left than the share, the job runs at the
// largest usable size that fits and pays Config.ResizeCost for each change
// (and Config.DecisionLatency for one after now).
// A job no size finishes in time is planned at its largest size, and marked
// not feasible. GPU jobs and CPU-only jobs plan on their own capacity (all
// nodes' GPUs but those other Nomad jobs hold, jobs.Node.UsableGPUs; all CPU
// slots; GPU constraints are not looked at).
func PlanDeadlines(s Snapshot, now time.Time) DeadlinePlan {
	cfg := s.Config
	if cfg.isZero() {
		cfg = DefaultConfig()
	}
	var capacity [2]int
	for _, n := range s.Capacity.Nodes {
		capacity[resGPU] += n.UsableGPUs()
		capacity[resCPU] += max(n.CPUSlots, n.FreeCPUSlots, 0)
	}
	var ds []*dlJob
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.Deadline == nil {
			continue
		}
		d := newDLJob(j, cfg, now)
		d.known, d.capacity = len(d.curve.sizes) > 0, capacity[d.res]
		d.curve = d.curve.upTo(capacity[d.res] / d.units)
		ds = append(ds, d)
	}
	order := slices.Clone(ds)
	slices.SortStableFunc(order, func(a, b *dlJob) int { return planOrder(a.j, b.j) })
	profs := [2]profile{{{t: 0, free: capacity[resGPU]}}, {{t: 0, free: capacity[resCPU]}}}
	cost := cfg.ResizeCost.Seconds()
	for _, d := range order {
		d.plan(&profs[d.res], cost, cfg.DecisionLatency.Seconds())
	}
	p := DeadlinePlan{Targets: make([]DeadlineTarget, len(ds))}
	for i, d := range ds {
		p.Targets[i] = d.target(now)
		if !p.Targets[i].Feasible && d.res == resGPU {
			p.Targets[i].Reason += foreignText(s.Capacity)
		}
	}
	return p
}

// foreignText is what a deadline reason adds when other Nomad jobs hold
// GPUs that edl could otherwise plan on ("" when they hold none).
func foreignText(c jobs.Capacity) string {
	foreign, all, usable := 0, 0, 0
	for _, n := range c.Nodes {
		foreign += max(n.ForeignGPUs, 0)
		all += max(n.GPUs, n.FreeGPUs, 0)
		usable += n.UsableGPUs()
	}
	if foreign == 0 {
		return ""
	}
	return fmt.Sprintf(" (other Nomad jobs hold %d of the cluster's %d GPUs: only %d are counted)", foreign, all, usable)
}

// Admit answers whether the deadline job cand may join the snapshot's jobs:
// a strict job is admitted when PlanDeadlines with it finishes it by its
// deadline and still finishes every strict job that it finished without
// it; a best-effort job always is, at risk when it would not finish. A
// refused job gets the earliest deadline that would be admitted now. Admit is
// pure: the API (at submission and for dry runs) and the planner loop ask
// the same question of the same snapshot.
func Admit(s Snapshot, cand JobState, now time.Time) Admission {
	return admit(s, cand, now, true)
}

// AdmitVerdict is Admit without a refused job's EarliestFeasible (left
// zero): that bisection plans the deadline jobs 30-70 times more, which a
// caller that only acts on the verdict (the deadline simulator, refusing
// hundreds of jobs of a burst) need not pay for.
func AdmitVerdict(s Snapshot, cand JobState, now time.Time) Admission {
	return admit(s, cand, now, false)
}

func admit(s Snapshot, cand JobState, now time.Time, earliest bool) Admission {
	if cand.Deadline == nil {
		return Admission{Admitted: true}
	}
	before := PlanDeadlines(s, now)
	try := func(at time.Time) (DeadlineTarget, string) {
		c := cand
		d := *cand.Deadline
		d.At, d.Share = at, 0
		c.Deadline = &d
		t := s
		t.Jobs = append(slices.Clone(s.Jobs), c)
		p := PlanDeadlines(t, now)
		mine := p.Targets[len(p.Targets)-1]
		if !mine.Feasible {
			return mine, mine.Reason
		}
		for i, b := range before.Targets {
			if b.Feasible && !p.Targets[i].Feasible && !t.Jobs[jobIndex(t.Jobs, b.JobID)].Deadline.BestEffort {
				why := fmt.Sprintf("it would make job %s miss its deadline", b.JobID)
				if c.GPUsPerWorker > 0 {
					why += foreignText(s.Capacity)
				}
				return mine, why
			}
		}
		return mine, ""
	}
	mine, why := try(cand.Deadline.At)
	a := Admission{Workers: mine.Share, ExpectedFinish: mine.Finish}
	if why == "" {
		a.Admitted = true
		return a
	}
	if cand.Deadline.BestEffort {
		a.Admitted, a.AtRisk, a.Reason = true, true, why
		return a
	}
	a.Reason = why
	if !earliest {
		return a
	}
	a.EarliestFeasible = earliestFeasible(now, cand.Deadline.At, func(at time.Time) bool {
		_, w := try(at)
		return w == ""
	})
	return a
}

// earliestFeasible bisects, to the second, for the earliest deadline after
// refused that ok accepts; zero when none up to a year from now.
func earliestFeasible(now, refused time.Time, ok func(time.Time) bool) time.Time {
	lo := refused
	if lo.Before(now) {
		lo = now
	}
	span := max(time.Second, lo.Sub(now))
	hi := lo.Add(span)
	for !ok(hi) {
		// Doubled past a year: none. Checked before doubling, which
		// overflows time.Duration when refused is centuries away (lo.Sub
		// saturates at its maximum), and a negative or zero span never
		// grew past the year: the search looped for ever.
		if span > 183*24*time.Hour {
			return time.Time{}
		}
		span *= 2
		hi = lo.Add(span)
	}
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	// Round to a whole second, and hand out only what was checked.
	for _, r := range []time.Time{hi.Truncate(time.Second), hi.Truncate(time.Second).Add(time.Second)} {
		if !r.Before(lo) && !r.After(hi.Add(time.Second)) && (r.Equal(hi) || ok(r)) {
			return r
		}
	}
	return hi
}

// planOrder is the order PlanDeadlines plans deadline jobs in: strict
// ones before best-effort ones, each earliest deadline first.
func planOrder(a, b *JobState) int {
	if a.Deadline.BestEffort != b.Deadline.BestEffort {
		if a.Deadline.BestEffort {
			return 1
		}
		return -1
	}
	return cmp.Or(a.Deadline.At.Compare(b.Deadline.At), cmp.Compare(a.ID, b.ID))
}

func jobIndex(js []JobState, id string) int {
	for i := range js {
		if js[i].ID == id {
			return i
		}
	}
	return -1
}

// dlJob is one deadline job while PlanDeadlines runs.
type dlJob struct {
	j     *JobState
	curve speedCurve
	res   int
	units int
	due   float64 // seconds from now to the deadline
	since float64 // seconds since its last resize (+Inf: never)
	share int     // planned size (0: none)
	// known: a speed is known for some size (before the cluster's
	// capacity, which it needs capacity/units of for one worker, caps it).
	known    bool
	capacity int
	now      int     // size at t = 0
	finish   float64 // seconds from now (+Inf: never)
	ok       bool
	reason   string
}

func newDLJob(j *JobState, cfg Config, now time.Time) *dlJob {
	d := &dlJob{j: j, curve: curveOf(j, cfg.CommRatio), finish: math.Inf(1)}
	d.res, d.units = resources(j)
	d.due = j.Deadline.At.Sub(now).Seconds()
	d.since = math.Inf(1)
	if !j.LastResize.IsZero() {
		d.since = now.Sub(j.LastResize).Seconds()
	}
	return d
}

// plan finds the job's least satisfactory share in prof and takes what it
// uses out of prof.
func (d *dlJob) plan(prof *profile, cost, lat float64) {
	c := d.curve
	work := d.j.Deadline.Remaining
	switch {
	case len(c.sizes) == 0 && d.known:
		d.reason = "no worker of it fits: the cluster has " + d.resourceText(d.capacity)
		if d.res == resGPU {
			d.reason += fmt.Sprintf(", a worker needs %d", d.units)
		}
		return
	case len(c.sizes) == 0 && d.j.Deadline.BestEffort:
		d.probe(prof)
		return
	case len(c.sizes) == 0:
		d.reason = "its speed is unknown: no throughput measured and no per_worker_speed"
		return
	case work <= 0:
		// Its workers are ending it: they keep their places meanwhile
		// (one to start it again if it has none).
		d.ok, d.finish, d.reason = true, 0, "its work is done"
		d.share, d.now = max(d.j.Current, 1), max(d.j.Current, 1)
		prof.take(0, max(cost, 1), d.now*d.units)
		return
	}
	lo := max(c.floorIndex(d.j.Deadline.Share), 0)
	hi := len(c.sizes) - 1
	fin := func(i int) float64 { f, _ := prof.run(c, i, d.units, work, cost, lat, d.j.Current, d.since); return f }
	best := lo
	if fin(lo) > d.due {
		// Finish time mostly falls as the share grows (a resize's stall
		// can make a bigger share slower near the end): bisect for the
		// least share in time, and scan when that is not one.
		l, h := lo, hi
		for l < h {
			m := (l + h) / 2
			if fin(m) <= d.due {
				h = m
			} else {
				l = m + 1
			}
		}
		best = l
		if fin(best) > d.due {
			best = lo
			for i := lo; i <= hi; i++ {
				if fin(i) <= d.due {
					best = i
					break
				}
				if fin(i) < fin(best) {
					best = i
				}
			}
		}
	}
	f, pieces := prof.run(c, best, d.units, work, cost, lat, d.j.Current, d.since)
	d.share, d.finish, d.ok = c.sizes[best], f, f <= d.due
	if len(pieces) > 0 && pieces[0].from == 0 {
		d.now = pieces[0].workers
	}
	for _, pc := range pieces {
		prof.take(pc.from, pc.to, pc.workers*d.units)
	}
	switch {
	case d.ok:
		d.reason = fmt.Sprintf("planned at %d workers, done %.0f s before its deadline", d.share, d.due-f)
	case math.IsInf(f, 1):
		d.reason = "no " + d.resourceText(-1) + " are left for it"
	case d.due < 0:
		d.reason = fmt.Sprintf("its deadline passed %.0f s ago (at %d workers it would finish in %.0f s)", math.Ceil(-d.due), d.share, f)
	default:
		d.reason = fmt.Sprintf("even at %d workers it would finish %.0f s after its deadline", d.share, f-d.due)
	}
}

// probe plans a best-effort job whose speed is unknown (no per_worker_speed,
// nothing measured yet) at workers.min, as far as the jobs before it leave
// room, for as long as it runs: admitted without a speed, it would else
// never run, and so never be measured. Its finish is unknown (not
// feasible, at risk); once its throughput is measured it is planned as
// the others are.
func (d *dlJob) probe(prof *profile) {
	want := max(min(d.j.Min, d.j.Max), 1)
	n := min(want, (*prof)[0].free/d.units)
	d.reason = "its speed is unknown: no throughput measured and no per_worker_speed"
	if n <= 0 {
		d.reason += "; no " + d.resourceText(-1) + " are left for it to run and be measured"
		return
	}
	d.share, d.now = n, n
	prof.take(0, math.Inf(1), n*d.units)
	d.reason += fmt.Sprintf("; it runs at %d workers until its throughput is measured", n)
}

// resourceText names n of the resource the job's workers hold ("4 GPUs",
// "1 CPU slots"; the name alone for n < 0).
func (d *dlJob) resourceText(n int) string {
	name := "GPUs"
	if d.res == resCPU {
		name = "CPU slots"
	}
	if n < 0 {
		return name
	}
	return fmt.Sprintf("%d %s", n, name)
}

func (d *dlJob) target(now time.Time) DeadlineTarget {
	t := DeadlineTarget{JobID: d.j.ID, Share: d.share, Now: d.now, Feasible: d.ok, Reason: d.reason}
	if !math.IsInf(d.finish, 1) {
		t.Finish = now.Add(time.Duration(d.finish * float64(time.Second)))
	}
	return t
}
