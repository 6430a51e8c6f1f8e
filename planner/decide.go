package planner

import (
	"container/heap"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// Decide is the policy: given a snapshot and the time, it returns a target
// worker count, placement and reason for every job of the snapshot, in the
// snapshot's order. It is pure and deterministic.
//
// It first plans without moving anybody: running guaranteed jobs keep their
// size, waiting ones get their minimum where it fits, spare GPUs go by
// marginal gain. When more than CompactThreshold guaranteed jobs would then
// wait for capacity it plans again from scratch (compaction): every
// guaranteed job's minimum in fairness and least-attained-service order
// (QueueLevels queues), jobs in cooldown back to their size, then spare GPUs
// by marginal gain. Opportunistic jobs come after guaranteed minimums; with
// HarvestFirst their minimums go before the growth of guaranteed jobs past
// the first queue, else after all guaranteed growth.
func Decide(s Snapshot, now time.Time) Plan {
	if p, ok := decideDeadlines(s, now); ok { // deadline jobs first: deadline_decide.go
		return p
	}
	cfg := s.Config
	if cfg.isZero() {
		cfg = DefaultConfig()
	}
	d := newDecider(s, cfg, now)
	d.run()
	if d.capacityWaiting > cfg.CompactThreshold {
		d.reset(s, true)
		d.run()
	}
	p := d.plan()
	replaceStragglers(s, cfg.Straggler, now, &p)
	return p
}

// jobPlan is one job while a plan is built.
type jobPlan struct {
	j           *JobState
	tenant      *tenant
	res, units  int
	elig        []int
	kind        eligKey
	own         []ownSlot
	slots       []slot
	min, max    int
	keep        int // the size a running job keeps when nobody is moved
	guaranteed  bool
	pinned      bool
	queue       int  // the ordering queue: attained service, or the Gittins rank with a history
	young       bool // in the first attained-service queue
	cooling     bool
	est         *throughputEstimate // fitted on first use
	submitted   int64               // SubmittedAt in Unix nanoseconds, for fast ordering
	why         whyNot
	whyN        int  // the gang size that did not fit
	forCapacity bool // it waits for capacity (not quota, not constraints)
}

// whyNot is why a job got no workers; the text is made only for the plan.
type whyNot int

const (
	whyNone whyNot = iota
	whyNoNode
	whyQuota
	whyNoRoom
	whyBehind
)

func (p *jobPlan) workers() int { return len(p.slots) }

type decider struct {
	cfg      Config
	now      time.Time
	compact  bool
	gittins  bool // ranked by the service history's Gittins index
	cl       *cluster
	total    int
	costFrac float64
	js       []*jobPlan
	guar     []*jobPlan // guaranteed, in priority order
	opp      []*jobPlan // opportunistic, in priority order

	capacityWaiting int
}

func newDecider(s Snapshot, cfg Config, now time.Time) *decider {
	d := &decider{now: now, cl: newCluster(s.Capacity, s.Jobs)}
	gpus := 0
	for _, n := range d.cl.nodes {
		d.total += n.cap[resGPU] + n.cap[resCPU]
		gpus += n.cap[resGPU]
	}
	cfg = cfg.ForCluster(gpus)
	d.cfg = cfg
	d.costFrac = cfg.Hysteresis + cfg.ResizeCost.Seconds()/cfg.Horizon.Seconds()
	tenants := map[string]*tenant{}
	for _, t := range s.Tenants {
		w := t.Weight
		if w <= 0 {
			w = 1
		}
		tenants[t.Name] = &tenant{name: t.Name, quota: t.QuotaGPUs, weight: w}
	}
	gittins := cfg.gittins(s.Service)
	d.gittins = gittins
	d.js = make([]*jobPlan, len(s.Jobs))
	all := make([]jobPlan, len(s.Jobs))
	for i := range s.Jobs {
		j := &s.Jobs[i]
		p := &all[i]
		p.j = j
		p.tenant = tenants[j.Tenant]
		if p.tenant == nil {
			p.tenant = &tenant{name: j.Tenant, weight: 1}
			tenants[j.Tenant] = p.tenant
		}
		p.res, p.units = resources(j)
		p.elig, p.kind = d.cl.eligible(j)
		p.own = d.cl.ownSlots(j)
		p.min = max(j.Min, 1)
		p.max = max(j.Max, p.min)
		if j.Pinned > 0 {
			p.pinned = true
			p.min = min(max(j.Pinned, p.min), p.max)
			p.max = p.min
		}
		p.keep = min(max(j.Current, p.min), p.max)
		p.guaranteed = j.Priority != jobs.Opportunistic
		p.young = cfg.queueOf(j.AttainedGPUSeconds) == 0
		if gittins {
			p.queue = cfg.gittinsOrder(s.Service, j.AttainedGPUSeconds)
		} else {
			p.queue = cfg.queueOf(j.AttainedGPUSeconds)
		}
		p.submitted = j.SubmittedAt.UnixNano()
		p.cooling = !j.LastResize.IsZero() && now.Before(j.LastResize.Add(cfg.Cooldown))
		d.js[i] = p
		if p.guaranteed {
			d.guar = append(d.guar, p)
		} else {
			d.opp = append(d.opp, p)
		}
	}
	sortPlans(d.guar)
	sortPlans(d.opp)
	return d
}

// reset undoes a run so that the same jobs can be planned again, with or
// without compaction.
func (d *decider) reset(s Snapshot, compact bool) {
	d.compact = compact
	d.capacityWaiting = 0
	d.cl = newCluster(s.Capacity, s.Jobs)
	for _, p := range d.js {
		p.slots = p.slots[:0]
		p.own = d.cl.ownSlots(p.j)
		p.why, p.whyN, p.forCapacity = whyNone, 0, false
		p.tenant.used = 0
	}
}

func (d *decider) run() {
	running, fresh := split(d.guar)
	if d.compact {
		d.each(d.guar, d.admitMin())
		d.each(d.guar, d.holdBelowPin)
		d.restoreCooling(d.guar)
	} else {
		d.each(running, d.placeRunning)
		d.each(fresh, d.admitMin())
	}
	for _, p := range d.guar {
		if p.workers() == 0 && p.forCapacity {
			d.capacityWaiting++
		}
	}
	oppRunning, oppFresh := split(d.opp)
	if d.cfg.HarvestFirst && len(d.opp) > 0 {
		// Guaranteed jobs of the first queue (young, likely short) grow
		// first; then opportunistic minimums, before older guaranteed
		// jobs grow: a GPU that starts a harvester gains more than one
		// that makes a long guaranteed job a little faster. Without
		// harvesters all guaranteed growth is one marginal-gain step.
		young := func(p *jobPlan) bool { return p.young }
		d.grow(d.guar, func(p *jobPlan) bool { return !p.cooling && young(p) })
		d.grow(d.guar, young)
		d.each(oppRunning, func(p *jobPlan) { d.gang(p, p.min) })
		d.each(oppFresh, func(p *jobPlan) { d.gang(p, p.min) })
	}
	d.grow(d.guar, func(p *jobPlan) bool { return !p.cooling })
	d.grow(d.guar, func(p *jobPlan) bool { return true })

	d.each(oppRunning, d.placeRunning)
	if d.cfg.HarvestFirst {
		for _, p := range oppRunning {
			for p.workers() > 0 && p.workers() < p.keep && d.addOne(p) {
			}
		}
	}
	d.each(oppFresh, func(p *jobPlan) { d.gang(p, p.min) })
	d.grow(d.opp, func(p *jobPlan) bool { return !p.cooling })
	d.grow(d.opp, func(p *jobPlan) bool { return true })
}

// placeRunning places a job that holds workers now: its current size
// (within its bounds), else its minimum, else (pinned above its size)
// the workers it has.
func (d *decider) placeRunning(p *jobPlan) {
	if !d.gang(p, p.keep) && p.keep > p.min {
		d.gang(p, p.min)
	}
	d.holdBelowPin(p)
}

// holdBelowPin keeps a running job that its tenant pinned above its size
// at the workers it has while the pinned size does not fit (its room still
// held by stopping workers, say), to grow when room frees: suspended to
// wait for the pin, it would stop, and restart from its checkpoint.
// A placed gang leaves p.why as it was: why the pin did not fit, for the
// reason.
func (d *decider) holdBelowPin(p *jobPlan) {
	if cur := p.j.Current; p.workers() == 0 && p.pinned && cur > 0 && cur < p.min {
		d.gang(p, cur)
	}
}

// restoreCooling gives jobs that resized lately their size back before
// anyone grows, so that they are not shrunk to feed others' growth.
func (d *decider) restoreCooling(ps []*jobPlan) {
	for _, p := range ps {
		for p.cooling && p.workers() > 0 && p.workers() < p.keep && d.addOne(p) {
		}
	}
}

// admitMin gang-places each job's minimum; with StrictOrder, once one
// does not fit for capacity no later one is tried.
func (d *decider) admitMin() func(*jobPlan) {
	blocked := false
	return func(p *jobPlan) {
		if blocked && p.workers() == 0 {
			p.why, p.forCapacity = whyBehind, true
			return
		}
		if !d.gang(p, p.min) && d.cfg.StrictOrder && p.forCapacity {
			blocked = true
		}
	}
}

// split separates jobs that hold workers now from those that do not,
// keeping the order.
func split(ps []*jobPlan) (running, fresh []*jobPlan) {
	for _, p := range ps {
		if p.j.Current > 0 {
			running = append(running, p)
		} else {
			fresh = append(fresh, p)
		}
	}
	return running, fresh
}

// gang places n workers of p, all or none.
func (d *decider) gang(p *jobPlan, n int) bool {
	if p.workers() > 0 {
		return true
	}
	if len(p.elig) == 0 {
		p.why = whyNoNode
		return false
	}
	if p.guaranteed && !p.tenant.fits(n*p.units) {
		p.why = whyQuota
		return false
	}
	for range n {
		if !d.cl.mayFit(p.kind, n) || !d.cl.placeOne(p) {
			for p.workers() > 0 {
				d.cl.unplaceLast(p)
			}
			d.cl.noRoom(p.kind, n)
			p.why, p.whyN = whyNoRoom, n
			p.forCapacity = true
			return false
		}
	}
	if p.guaranteed {
		p.tenant.used += n * p.units
	}
	return true
}

// addOne places one more worker of a job that already runs in the plan.
func (d *decider) addOne(p *jobPlan) bool {
	if p.workers() >= p.max || (p.guaranteed && !p.tenant.fits(p.units)) {
		return false
	}
	if !d.cl.mayFit(p.kind, 1) || !d.cl.placeOne(p) {
		d.cl.noRoom(p.kind, 1)
		return false
	}
	if p.guaranteed {
		p.tenant.used += p.units
	}
	return true
}

// grow hands spare capacity one worker at a time to the admitted job of ps
// (that passes ok) whose next worker adds the most throughput per unit.
func (d *decider) grow(ps []*jobPlan, ok func(*jobPlan) bool) {
	var q growQueue
	for _, p := range ps {
		if p.workers() > 0 && p.workers() < p.max && ok(p) {
			q = append(q, growItem{p: p, gain: d.gain(p)})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		p := q[0].p
		if d.addOne(p) && p.workers() < p.max {
			q[0].gain = d.gain(p)
			heap.Fix(&q, 0)
		} else {
			heap.Pop(&q)
		}
	}
}

// gain is the speedup the next worker of p adds, per unit, adjusted by the
// resize cost: the step past the current size pays Hysteresis +
// ResizeCost/Horizon of the job's speed, the step that restores it (avoiding
// a shrink) earns it.
func (d *decider) gain(p *jobPlan) float64 {
	if p.est == nil {
		e := newEstimate(p.j.Throughput, d.cfg.CommRatio)
		p.est = &e
	}
	n := p.workers()
	g := p.est.speedup(n+1) - p.est.speedup(n)
	if cur := p.j.Current; cur > 0 {
		switch {
		case n == cur:
			g -= d.costFrac * p.est.speedup(n)
		case n+1 == cur:
			g += d.costFrac * p.est.speedup(n+1)
		}
	}
	return g / float64(p.units)
}

func (d *decider) plan() Plan {
	pl := Plan{Targets: make([]Target, len(d.js)), Compacted: d.compact}
	for i, p := range d.js {
		w := p.workers()
		if p.guaranteed && w == 0 {
			pl.Waiting++
		}
		if p.cooling {
			if until := p.j.LastResize.Add(d.cfg.Cooldown); pl.Recheck.IsZero() || until.Before(pl.Recheck) {
				pl.Recheck = until
			}
		}
		pl.Targets[i] = Target{
			JobID:     p.j.ID,
			Workers:   w,
			Placement: d.cl.placement(p),
			Reason:    d.reason(p),
			Suspend:   w == 0 && p.j.Current > 0,
		}
	}
	return pl
}
