package builtin

import (
	"fmt"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

// lostEvents records, as job events, the members that the generation this
// worker's leader just formed dropped without a graceful leave: a worker's
// death is otherwise visible only as a smaller world. (A graceful leave has
// its own event, written by the leaver.) It is the leader's OnFormed hook:
// the reporter queues the events and sends them off the leader's loop.
func (w *Worker) lostEvents(g *coord.Generation, lost []coord.Loss) {
	for _, l := range lost {
		w.rep.Event(jobs.EventWorker,
			fmt.Sprintf("worker %s lost: %s; generation %d formed without it", l.Worker, l.Cause.Describe(), g.Number),
			map[string]any{"worker": l.Worker, "cause": string(l.Cause), "generation": g.Number, "lost": true})
	}
}
