package jobs

// The job state machine. Every write that changes a job's state goes through
// CanTransition, so this table is the whole truth:
//
//	pending ----> starting ----> running ----> succeeded
//	   |            ^    |           |
//	   |            |    v           |
//	   +--------> suspended <--------+
//
//	pending, starting, running, suspended ----> failed
//	pending, starting, running, suspended ----> cancelling ----> cancelled
//
//	from         to
//	pending      starting, suspended, cancelling, failed
//	starting     running, suspended, cancelling, failed
//	running      succeeded, failed, suspended, cancelling
//	suspended    starting, cancelling, failed
//	cancelling   cancelled, failed
//	succeeded, failed, cancelled: terminal, nothing
//
// suspended is a job that holds no workers while queued behind others or
// after preemption; it goes back through starting. Only the planner moves
// cancelling to cancelled, once the job's workers are gone.
var transitions = map[State][]State{
	Pending:    {Starting, Suspended, Cancelling, Failed},
	Starting:   {Running, Suspended, Cancelling, Failed},
	Running:    {Succeeded, Failed, Suspended, Cancelling},
	Suspended:  {Starting, Cancelling, Failed},
	Cancelling: {Cancelled, Failed},
}

// States lists every state, in the order of a job's life.
var States = []State{Pending, Starting, Running, Suspended, Succeeded, Failed, Cancelling, Cancelled}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, k := range States {
		if s == k {
			return true
		}
	}
	return false
}

// CanTransition reports whether the table allows from -> to.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Live reports whether a job in state s may still be changed by its tenant
// (resized, re-prioritised): not terminal and not being cancelled.
func (s State) Live() bool { return !s.Terminal() && s != Cancelling }
