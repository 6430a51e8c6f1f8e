package planner

import (
	"cmp"
	"container/heap"
	"math"
)

// tenant is a tenant's standing while a plan is built.
type tenant struct {
	name   string
	quota  int
	weight float64
	used   int // units held by its guaranteed jobs in this plan
}

// fits reports whether the tenant's guaranteed jobs may take units more.
func (t *tenant) fits(units int) bool { return t.quota <= 0 || t.used+units <= t.quota }

// fairKey orders tenants: the smaller share of its quota first (a tenant
// without quota measured against the whole cluster), then the smaller
// weighted share, then the name.
func (t *tenant) fairKey(total int) (float64, float64) {
	q := t.quota
	if q <= 0 {
		q = max(total, 1)
	}
	return float64(t.used) / float64(q), float64(t.used) / t.weight
}

// byPriority orders jobs within a tenant: Tiresias' queue (less attained
// service first); within a queue, jobs that hold workers before those that
// do not (only a better queue preempts, as in Tiresias, so jobs of one queue
// do not take turns evicting each other); then first come, first served;
// then ID.
func byPriority(a, b *jobPlan) int {
	if c := cmp.Compare(a.queue, b.queue); c != 0 {
		return c
	}
	if ar, br := a.j.Current > 0, b.j.Current > 0; ar != br {
		if ar {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.submitted, b.submitted); c != 0 {
		return c
	}
	return cmp.Compare(a.j.ID, b.j.ID)
}

// fairQueue merges per-tenant job lists (each already in priority order) by
// tenant fairness, re-ranking a tenant each time one of its jobs is served.
type fairQueue struct {
	total int
	lists []*tenantList
}

type tenantList struct {
	t    *tenant
	jobs []*jobPlan
}

func (q *fairQueue) Len() int { return len(q.lists) }
func (q *fairQueue) Less(i, k int) bool {
	a, b := q.lists[i].t, q.lists[k].t
	a1, a2 := a.fairKey(q.total)
	b1, b2 := b.fairKey(q.total)
	if a1 != b1 {
		return a1 < b1
	}
	if a2 != b2 {
		return a2 < b2
	}
	return a.name < b.name
}
func (q *fairQueue) Swap(i, k int) { q.lists[i], q.lists[k] = q.lists[k], q.lists[i] }
func (q *fairQueue) Push(x any)    { q.lists = append(q.lists, x.(*tenantList)) }
func (q *fairQueue) Pop() any {
	l := q.lists[len(q.lists)-1]
	q.lists = q.lists[:len(q.lists)-1]
	return l
}

// each calls serve for every job of js (in priority order within each
// tenant) in tenant-fair order.
func (d *decider) each(js []*jobPlan, serve func(*jobPlan)) {
	byTenant := map[*tenant]*tenantList{}
	q := &fairQueue{total: d.total}
	for _, p := range js {
		l, ok := byTenant[p.tenant]
		if !ok {
			l = &tenantList{t: p.tenant}
			byTenant[p.tenant] = l
			q.lists = append(q.lists, l)
		}
		l.jobs = append(l.jobs, p)
	}
	heap.Init(q)
	for q.Len() > 0 {
		l := q.lists[0]
		p := l.jobs[0]
		l.jobs = l.jobs[1:]
		serve(p)
		if len(l.jobs) == 0 {
			heap.Pop(q)
		} else {
			heap.Fix(q, 0)
		}
	}
}

// growQueue is a max-heap of jobs by the gain of their next worker.
type growQueue []growItem

type growItem struct {
	p    *jobPlan
	gain float64
}

func (g growQueue) Len() int { return len(g) }
func (g growQueue) Less(i, k int) bool {
	if g[i].gain != g[k].gain && !(math.IsNaN(g[i].gain) || math.IsNaN(g[k].gain)) {
		return g[i].gain > g[k].gain
	}
	return byPriority(g[i].p, g[k].p) < 0
}
func (g growQueue) Swap(i, k int) { g[i], g[k] = g[k], g[i] }
func (g *growQueue) Push(x any)   { *g = append(*g, x.(growItem)) }
func (g *growQueue) Pop() any {
	it := (*g)[len(*g)-1]
	*g = (*g)[:len(*g)-1]
	return it
}
