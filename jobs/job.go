package jobs

import "time"

// Job is a submitted job as the API shows it and the store keeps it.
type Job struct {
	ID             string         `json:"id"`
	Tenant         string         `json:"tenant"`
	State          State          `json:"state"`
	Reason         string         `json:"reason,omitempty"` // why it waits or failed
	Spec           Spec           `json:"spec"`
	Workers        WorkerCount    `json:"workers"`
	Progress       Progress       `json:"progress"`
	LastCheckpoint *CheckpointRef `json:"last_checkpoint,omitempty"`
	// Deadline is a deadline job's due time: spec.deadline, or submission
	// plus spec.within.
	Deadline *time.Time `json:"deadline,omitempty"`
	// ExpectedFinish is when the planner's plan finishes a live deadline
	// job (absent: no plan finishes it), kept current every round.
	ExpectedFinish *time.Time `json:"expected_finish,omitempty"`
	// AtRisk: the plan does not finish the live deadline job by its
	// deadline.
	AtRisk bool `json:"at_risk,omitempty"`
	// DeadlineResult is how a deadline job ended, set with its
	// deadline_met or deadline_missed event (absent before, and for a
	// cancelled job).
	DeadlineResult *DeadlineResult `json:"deadline_result,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	// Version increases with every write; the store uses it for optimistic
	// concurrency.
	Version int64 `json:"version"`
	// Planner is what the planner keeps about the job so that a planner
	// taking over carries on where the last one stopped (planner_state.go).
	Planner *PlannerState `json:"planner,omitempty"`
}

// WorkerCount is how many workers a job has and how many the planner wants.
type WorkerCount struct {
	Current int `json:"current"`
	Target  int `json:"target"`
	// Pinned, when set, is a size the tenant asked for with POST .../scale.
	Pinned int `json:"pinned,omitempty"`
}

// Progress is what the workers report, a few times a second at most.
type Progress struct {
	Epoch   int   `json:"epoch"`
	Step    int64 `json:"step"`
	Samples int64 `json:"samples"`
	// Loss is null in JSON when it is not finite (a diverged run), with
	// LossNonFinite naming it.
	Loss float64 `json:"loss"`
	// LossNonFinite is "NaN", "Infinity" or "-Infinity" when Loss is not
	// a finite number (then "loss" is null), else absent. It is written
	// from Loss; Go code reads Loss.
	LossNonFinite string  `json:"loss_non_finite,omitempty" enums:"NaN,Infinity,-Infinity"`
	SamplesPerS   float64 `json:"samples_per_s"`
	WorldSize     int     `json:"world_size"`
	Generation    int64   `json:"generation,omitempty"`
	TotalEpochs   int     `json:"total_epochs,omitempty"`
}

// CheckpointRef names a committed checkpoint.
type CheckpointRef struct {
	Step      int64     `json:"step"`
	Epoch     int       `json:"epoch"`
	URL       string    `json:"url"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
}

// EventType classifies job events.
type EventType string

const (
	EventState          EventType = "state"      // a state change
	EventScale          EventType = "scale"      // a scaling decision, with its reason
	EventWorker         EventType = "worker"     // a worker joined or left
	EventCheckpoint     EventType = "checkpoint" // a checkpoint committed or skipped
	EventError          EventType = "error"
	EventDeadlineAtRisk EventType = "deadline_at_risk" // a deadline job's expected finish passed its deadline (once per crossing)
	EventDeadlineMet    EventType = "deadline_met"     // a deadline job succeeded in time (data: early_s)
	EventDeadlineMissed EventType = "deadline_missed"  // a deadline job finished late (late_s) or failed
)

// Event is one entry of a job's event log. ID is assigned by the store and
// orders events (it is the SSE id).
type Event struct {
	ID      string         `json:"id"`
	Time    time.Time      `json:"time"`
	Type    EventType      `json:"type"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}
