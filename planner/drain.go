package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/edl-nomad/edl/jobs"
)

// DrainPlan is what the loop does for one job whose workers sit on
// draining nodes, on top of Decide's target: the paper's migration, driven
// by the cluster's drain, instead of a suspend.
type DrainPlan struct {
	// Count is what to scale the job to: the target, plus the draining
	// workers that still hold their place while replacements start
	// elsewhere. The job's recorded target stays Target.Workers.
	Count int
	// Remove lists draining workers to remove now, gracefully
	// (Cluster.StopWorker, after marking them leaving): enough workers run
	// elsewhere for the target without them.
	Remove []string
	// Reason replaces the target's reason; empty when no worker of the job
	// drains (then Count is Target.Workers and Remove is empty).
	Reason string
}

// PlanDrain moves a job's workers off draining nodes without stopping the
// job. Decide plans without the draining nodes (the cluster leaves them
// out of Capacity), so its target t already says how many workers fit
// elsewhere. ws are the job's workers as Cluster.Workers lists them
// (Draining set on those whose node drains; queued ones count as starting
// elsewhere). Step by step, one call per round:
//
//  1. grow first: ask for t workers besides the draining ones (Count = t +
//     draining), so the cluster places replacements on other nodes while
//     the draining workers keep training;
//  2. once replacements run, remove as many draining workers as can go
//     with at least t workers still running, gracefully (each leaves
//     after its step and exits 0; the cluster lowers the count as each
//     one is gone, which the next round's Count matches);
//  3. when nothing else has room (t is 0), the job is suspended, and the
//     reason says so rather than blaming preemption.
//
// PlanDrain is pure.
func PlanDrain(t Target, ws []jobs.Worker) DrainPlan {
	var draining, drainingRunning, others, othersRunning []jobs.Worker
	for _, w := range ws {
		if w.State != jobs.WorkerPending && w.State != jobs.WorkerRunning {
			continue
		}
		switch {
		case w.Draining && !w.Queued:
			draining = append(draining, w)
			if w.State == jobs.WorkerRunning {
				drainingRunning = append(drainingRunning, w)
			}
		default:
			others = append(others, w)
			if w.State == jobs.WorkerRunning {
				othersRunning = append(othersRunning, w)
			}
		}
	}
	if len(draining) == 0 {
		return DrainPlan{Count: t.Workers}
	}
	nodes := drainNodes(draining)
	if t.Workers == 0 {
		return DrainPlan{Count: 0, Reason: fmt.Sprintf("suspend (had %d): node %s draining and no other node has room", len(draining)+len(others), nodes)}
	}
	// Draining workers that may leave now: those beyond what the target
	// needs of the running ones, pending ones first (they do no work).
	keep := max(0, t.Workers-len(othersRunning))
	slices.SortStableFunc(draining, func(a, b jobs.Worker) int {
		ap, bp := a.State == jobs.WorkerPending, b.State == jobs.WorkerPending
		switch {
		case ap && !bp:
			return -1
		case bp && !ap:
			return 1
		}
		return b.Index - a.Index // highest name index first
	})
	canGo := len(draining) - min(keep, len(drainingRunning))
	var remove []string
	for _, w := range draining[:canGo] {
		remove = append(remove, w.ID)
	}
	dp := DrainPlan{Count: t.Workers + len(draining), Remove: remove}
	starting := max(0, t.Workers-len(othersRunning))
	switch {
	case len(remove) == len(draining):
		dp.Reason = fmt.Sprintf("move off draining node %s: %d worker(s) leave, %d run elsewhere", nodes, len(remove), len(othersRunning))
	case len(remove) > 0:
		dp.Reason = fmt.Sprintf("move off draining node %s: %d worker(s) leave, %d wait for %d starting elsewhere", nodes, len(remove), len(draining)-len(remove), starting)
	default:
		dp.Reason = fmt.Sprintf("move off draining node %s: %d worker(s) keep training until %d start elsewhere", nodes, len(draining), starting)
	}
	return dp
}

// drainNodes names the draining nodes, sorted, comma-separated.
func drainNodes(ws []jobs.Worker) string {
	var ns []string
	for _, w := range ws {
		if !slices.Contains(ns, w.Node) {
			ns = append(ns, w.Node)
		}
	}
	slices.Sort(ns)
	return strings.Join(ns, ",")
}

// LiveWorkers are the workers of ws that hold or will hold resources and
// are not on their way out: pending or running.
func LiveWorkers(ws []jobs.Worker) []jobs.Worker {
	var out []jobs.Worker
	for _, w := range ws {
		if w.State == jobs.WorkerPending || w.State == jobs.WorkerRunning {
			out = append(out, w)
		}
	}
	return out
}
