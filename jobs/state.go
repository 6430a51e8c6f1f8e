package jobs

// State is where a job is in its life. The allowed transitions are the table
// in transitions.go.
type State string

const (
	Pending    State = "pending"
	Starting   State = "starting"
	Running    State = "running"
	Suspended  State = "suspended"
	Succeeded  State = "succeeded"
	Failed     State = "failed"
	Cancelling State = "cancelling"
	Cancelled  State = "cancelled"
)

// Terminal reports whether nothing more will happen to a job in state s.
func (s State) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled
}
