package sweep

import "time"

// State is a sweep's state (see the diagram in doc.go).
type State string

const (
	Running    State = "running"
	Succeeded  State = "succeeded"
	Cancelling State = "cancelling"
	Cancelled  State = "cancelled"
)

// Terminal reports whether the sweep is over.
func (s State) Terminal() bool { return s == Succeeded || s == Cancelled }

// TrialState is a trial's state (see doc.go).
type TrialState string

const (
	TrialPending   TrialState = "pending"
	TrialRunning   TrialState = "running"
	TrialCompleted TrialState = "completed"
	TrialCut       TrialState = "cut"
	TrialFailed    TrialState = "failed"
	TrialCancelled TrialState = "cancelled"
)

// Ended reports whether the trial will not run again.
func (s TrialState) Ended() bool {
	return s == TrialCompleted || s == TrialCut || s == TrialFailed || s == TrialCancelled
}

// Sweep is a submitted sweep as the API shows it and the store keeps it.
type Sweep struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	State  State  `json:"state" enum:"running,succeeded,cancelling,cancelled"`
	Reason string `json:"reason,omitempty"`
	Spec   Spec   `json:"spec"`
	// Trials holds every trial, started or not, in index order.
	Trials []Trial `json:"trials"`
	// Best is the best trial so far: the one at the highest rung with the
	// best metric there.
	Best      *Best     `json:"best,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Version increases with every write (optimistic concurrency).
	Version int64 `json:"version"`
}

// TrialCounts is how many of the sweep's trials are in each state.
func (s Sweep) TrialCounts() map[TrialState]int {
	n := map[TrialState]int{}
	for _, t := range s.Trials {
		n[t.State]++
	}
	return n
}

// Trial is one point of the search space and the job that trains it.
type Trial struct {
	Index  int            `json:"index"`
	Params map[string]any `json:"parameters"`
	State  TrialState     `json:"state" enum:"pending,running,completed,cut,failed,cancelled"`
	JobID  string         `json:"job_id,omitempty"`
	// Rung is the highest rung whose milestone the trial passed (0 is the
	// first); -1 before the first.
	Rung    int          `json:"rung"`
	Results []RungResult `json:"results,omitempty"`
	// LastMetric is the newest value of the sweep's metric it reported.
	LastMetric *Point `json:"last_metric,omitempty"`
	// Workers is the size the controller pinned the trial's job to.
	Workers int `json:"workers,omitempty"`
	// Cap, once set, is the most workers the trial gets again: a size it
	// was shrunk back to because the next one up was no faster (so that a
	// noisy measurement does not make it flap).
	Cap       int       `json:"cap,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// RungResult is a trial's metric at a rung's milestone.
type RungResult struct {
	Rung int `json:"rung"`
	// Step is where the result was taken: the rung's milestone in the
	// scheduler's unit (a step, or with unit "epochs" the epochs done).
	Step int64 `json:"step"`
	// Value is null in JSON when it is not finite (a diverged loss), and
	// NonFinite names it.
	Value float64 `json:"value"`
	// NonFinite is "NaN", "Infinity" or "-Infinity" when Value is not a
	// finite number, else absent (nonfinite.go; written from Value).
	NonFinite string `json:"non_finite,omitempty" enums:"NaN,Infinity,-Infinity"`
}

// Point is one reported value of a metric: the applied step it belongs
// to and the epochs done when it was measured (an epoch-end validation
// loss carries the epoch it ended: 1 for the first).
type Point struct {
	Step int64 `json:"step"`
	// Value is null in JSON when it is not finite (a diverged loss), and
	// NonFinite names it.
	Value float64 `json:"value"`
	// NonFinite is "NaN", "Infinity" or "-Infinity" when Value is not a
	// finite number, else absent (nonfinite.go; written from Value).
	NonFinite string `json:"non_finite,omitempty" enums:"NaN,Infinity,-Infinity"`
	Epoch     int    `json:"epoch,omitempty"`
}

// Best names the best trial.
type Best struct {
	Trial  int            `json:"trial"`
	JobID  string         `json:"job_id,omitempty"`
	Params map[string]any `json:"parameters"`
	Rung   int            `json:"rung"`
	Metric float64        `json:"metric"`
}

// EventType classifies sweep events.
type EventType string

const (
	EventSubmitted EventType = "submitted"
	EventStarted   EventType = "trial_started"
	EventPromoted  EventType = "trial_promoted"
	EventCut       EventType = "trial_cut"
	EventEnded     EventType = "trial_ended"
	EventGrown     EventType = "trial_grown"
	EventShrunk    EventType = "trial_shrunk"

	EventBestChanged EventType = "best_changed"
	EventState       EventType = "state"
)

// Event is one entry of a sweep's event log; ID (the SSE id) is the
// store's.
type Event struct {
	ID      string         `json:"id"`
	Time    time.Time      `json:"time"`
	Type    EventType      `json:"type"`
	Trial   *int           `json:"trial,omitempty"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// NewTrials draws every trial's parameters, all pending.
func NewTrials(s Spec) []Trial {
	out := make([]Trial, s.NumTrials)
	for i := range out {
		out[i] = Trial{Index: i, Params: Sample(s, i), State: TrialPending, Rung: -1}
	}
	return out
}
