package builtin

import "github.com/edl-nomad/edl/worker/coord"

// lostEvents records, as job events, the members that the generation this
// worker's leader just formed dropped without a graceful leave
// (core.Reporter.Lost). It is the leader's OnFormed hook; w.rep is made
// after the leader, hence this indirection.
func (w *Worker) lostEvents(g *coord.Generation, lost []coord.Loss) { w.rep.Lost(g, lost) }
