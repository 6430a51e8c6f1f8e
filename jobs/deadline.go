package jobs

import "time"

// DeadlinePolicy says what a deadline job that cannot be guaranteed gets.
type DeadlinePolicy string

const (
	// DeadlineStrict (the default) admits a job only with a plan that
	// finishes it in time; else the submission is refused (422) with the
	// earliest deadline that would be admitted.
	DeadlineStrict DeadlinePolicy = "strict"
	// DeadlineBestEffort admits it anyway, marked at risk.
	DeadlineBestEffort DeadlinePolicy = "best_effort"
)

// DeadlineResult is how a deadline job ended: what its deadline_met or
// deadline_missed event says.
type DeadlineResult struct {
	// Met: it succeeded by its deadline.
	Met bool `json:"met"`
	// Finished is when it ended: its record's last write before the
	// planner tore it down (the workers' final state).
	Finished time.Time `json:"finished"`
	// Failed: it failed (a miss, whenever it ended).
	Failed bool `json:"failed,omitempty"`
}

// MaxWithin bounds within (a year).
const MaxWithin = 366 * 24 * time.Hour

// HasDeadline reports whether the job has a deadline or within.
func (s Spec) HasDeadline() bool { return s.Deadline != nil || s.Within != "" }

// DeadlineAt is the job's deadline for a job submitted at created (zero
// when it has none).
func (s Spec) DeadlineAt(created time.Time) time.Time {
	if s.Deadline != nil {
		return *s.Deadline
	}
	if d, err := time.ParseDuration(s.Within); err == nil && s.Within != "" {
		return created.Add(d)
	}
	return time.Time{}
}

// BestEffort reports whether the deadline is best effort.
func (s Spec) BestEffort() bool { return s.DeadlinePolicy == DeadlineBestEffort }

// Work is the job's total work in the unit its speed is measured in:
// samples x epochs for the built-in trainer, trainer.exec.total_steps for a
// program; 0 when unknown.
func (s Spec) Work() float64 {
	switch {
	case s.Trainer.Builtin != nil:
		b := s.Trainer.Builtin
		return float64(b.Dataset.Samples) * float64(b.Epochs)
	case s.Trainer.Exec != nil:
		return float64(s.Trainer.Exec.TotalSteps)
	}
	return 0
}

// withDeadlineDefaults fills a deadline job's worker range: the planner
// picks the size, so min is 1 and max, when not given, MaxWorkers; the
// policy is strict.
func (s Spec) withDeadlineDefaults() Spec {
	if !s.HasDeadline() {
		return s
	}
	if s.DeadlinePolicy == "" {
		s.DeadlinePolicy = DeadlineStrict
	}
	if s.Workers.Min == 0 {
		s.Workers.Min = 1
	}
	if s.Workers.Max == 0 {
		s.Workers.Max = MaxWorkers
	}
	return s
}

func validateDeadline(v *ValidationError, s Spec) {
	if e := s.Trainer.Exec; e != nil && (e.TotalSteps < 0 || e.TotalSteps > 1e15) {
		v.add("trainer.exec.total_steps", "must be between 0 and 1e15")
	}
	if !s.HasDeadline() {
		if s.DeadlinePolicy != "" && s.DeadlinePolicy != DeadlineStrict {
			v.add("deadline_policy", "set only with deadline or within")
		}
		return
	}
	if s.Deadline != nil && s.Within != "" {
		v.add("within", "give deadline or within, not both")
	}
	if s.Within != "" {
		if d, err := time.ParseDuration(s.Within); err != nil || d <= 0 || d > MaxWithin {
			v.add("within", "must be a duration such as 90m or 2h30m, above 0 and at most %s", MaxWithin)
		}
	}
	switch s.DeadlinePolicy {
	case "", DeadlineStrict, DeadlineBestEffort:
	default:
		v.add("deadline_policy", "must be %q or %q", DeadlineStrict, DeadlineBestEffort)
	}
	if s.PerWorkerSpeed < 0 || s.PerWorkerSpeed > 1e12 {
		v.add("per_worker_speed", "must be between 0 and 1e12")
	}
	if e := s.Trainer.Exec; e != nil && e.TotalSteps == 0 {
		v.add("trainer.exec.total_steps", "required for a deadline job: the program's work in steps (it reports its step in $EDL_METRICS_FILE; see docs/exec.md)")
	}
}
