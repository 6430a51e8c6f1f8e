package planner

import (
	"fmt"
	"slices"
	"strings"
)

// reason is the one line the job's event log gets for its target.
func (d *decider) reason(p *jobPlan) string {
	w, cur := p.workers(), p.j.Current
	switch {
	case w == 0 && cur == 0:
		return "waiting: " + d.whyText(p)
	case w == 0 && (p.why == whyNoNode || p.why == whyQuota):
		// Nobody took its place: the nodes are gone (drained, down) or
		// the tenant's quota is reached.
		return fmt.Sprintf("suspend (had %d): %s", cur, d.whyText(p))
	case w == 0:
		if !p.guaranteed {
			return fmt.Sprintf("suspend (had %d): GPUs wanted by guaranteed jobs; %s", cur, d.whyText(p))
		}
		return fmt.Sprintf("suspend (had %d): preempted by higher-priority claims; %s", cur, d.whyText(p))
	case p.pinned && w < p.min && w == cur:
		return fmt.Sprintf("keep %d workers until the %d pinned by the tenant fit: %s", w, p.min, d.whyText(p))
	case p.pinned && w < p.min:
		return fmt.Sprintf("grow %d -> %d toward the %d pinned by the tenant: %s", cur, w, p.min, d.whyText(p))
	case w == cur:
		return fmt.Sprintf("keep %d workers", w)
	case p.pinned && cur > 0:
		return fmt.Sprintf("resize %d -> %d: pinned to %d by the tenant", cur, w, w)
	case cur > 0 && w > cur && w <= p.j.Target:
		return fmt.Sprintf("replace %d lost worker(s): %d -> %d", w-cur, cur, w)
	case cur == 0:
		return fmt.Sprintf("start with %d workers (%s): %s", w, unitsText(p, w), d.grantText(p))
	case w > cur:
		return fmt.Sprintf("grow %d -> %d: spare capacity, largest marginal gain", cur, w)
	case w == p.min && d.compact:
		return fmt.Sprintf("shrink %d -> %d: compacted to minimum, %d jobs waited for capacity", cur, w, d.capacityWaiting)
	case !p.guaranteed:
		return fmt.Sprintf("shrink %d -> %d: capacity wanted by guaranteed jobs", cur, w)
	case w > p.max || cur > p.max:
		return fmt.Sprintf("shrink %d -> %d: above maximum", cur, w)
	default:
		return fmt.Sprintf("shrink %d -> %d: capacity given to jobs with larger marginal gain or higher priority", cur, w)
	}
}

func (d *decider) whyText(p *jobPlan) string {
	switch p.why {
	case whyNoNode:
		return d.noNodeText(p)
	case whyQuota:
		return fmt.Sprintf("tenant %s quota %d reached (%d held)", p.tenant.name, p.tenant.quota, p.tenant.used)
	case whyBehind:
		return "strict order: an earlier job waits for capacity"
	case whyNoRoom:
		return fmt.Sprintf("%d workers (%s) do not fit", p.whyN, unitsText(p, p.whyN))
	}
	return "no capacity left"
}

// noNodeText says why no node could ever hold one worker: there are no
// schedulable nodes, none has the GPU class, or none has that many GPUs.
func (d *decider) noNodeText(p *jobPlan) string {
	if len(d.cl.nodes) == 0 {
		return "no schedulable node (every node is down, ineligible or draining)"
	}
	matching, most := 0, 0
	for _, n := range d.cl.nodes {
		if p.res == resGPU && !matches(n.class, p.j.GPU) {
			continue
		}
		matching++
		most = max(most, n.cap[p.res])
	}
	switch {
	case p.res == resCPU:
		return "no schedulable node has a CPU slot"
	case matching == 0 && constraintText(p.j) != "":
		return "no node matches its GPU constraint" + constraintText(p.j) +
			" (or those that do are down, ineligible or draining)"
	case most == 0:
		return "no schedulable node has GPUs"
	}
	return fmt.Sprintf("needs %d GPUs per worker; the largest schedulable node has %d", p.units, most)
}

func (d *decider) grantText(p *jobPlan) string {
	var b strings.Builder
	if p.guaranteed {
		b.WriteString("guaranteed minimum")
	} else {
		b.WriteString("opportunistic, idle capacity")
	}
	if p.workers() > p.min {
		b.WriteString(" plus spare capacity")
	}
	if d.gittins {
		fmt.Fprintf(&b, " (Gittins queue %d)", p.queue)
	} else {
		fmt.Fprintf(&b, " (queue %d)", p.queue)
	}
	return b.String()
}

func unitsText(p *jobPlan, n int) string {
	if p.res == resCPU {
		return fmt.Sprintf("%d CPU slots", n)
	}
	return fmt.Sprintf("%d GPUs", n*p.units)
}

func constraintText(j *JobState) string {
	if j.GPUsPerWorker <= 0 || j.GPU == nil {
		return ""
	}
	var parts []string
	if j.GPU.Model != "" {
		parts = append(parts, "model="+j.GPU.Model)
	}
	if j.GPU.MinMemoryMiB > 0 {
		parts = append(parts, fmt.Sprintf("min_memory_mib=%d", j.GPU.MinMemoryMiB))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, " ") + ")"
}

func sortPlans(ps []*jobPlan) { slices.SortFunc(ps, byPriority) }
