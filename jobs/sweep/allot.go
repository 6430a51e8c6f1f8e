package sweep

// Slot is a trial as the reallocation sees it.
type Slot struct {
	Index int
	// Min and Max bound its job's workers; Pinned is the size it has now
	// (0 for a trial just started: it gets Min).
	Min, Max, Pinned int
	// Placed: its job holds its workers (it runs); only a placed trial grows,
	// so that a grow never delays a trial that waits to start.
	Placed bool
}

// Allot sizes a sweep's running trials, given best first: each keeps its
// size (a trial just started gets its minimum), and what is left of the
// budget after them and after held (workers that ending trials still
// hold) goes to the placed trials in that order, each up to its maximum
// and at most doubling at a time.
// Nobody shrinks (Decide pins a suspended trial back to its minimum before
// it asks); the budget nobody can use is left to the cluster.
func Allot(budget, held int, slots []Slot) map[int]int {
	out := make(map[int]int, len(slots))
	used := held
	for _, s := range slots {
		n := max(s.Pinned, s.Min)
		out[s.Index] = n
		used += n
	}
	left := budget - used
	for _, s := range slots {
		if left <= 0 {
			break
		}
		if !s.Placed {
			continue
		}
		// At most doubling per round, so that the planner measures the
		// new size before the trial grows further (UsefulMax).
		add := min(left, s.Max-out[s.Index], out[s.Index])
		if add > 0 {
			out[s.Index] += add
			left -= add
		}
	}
	return out
}
