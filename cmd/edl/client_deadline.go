package main

import (
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// deadlineRows adds a deadline job's deadline and expected finish to edl
// get's table: the planner's (expected_finish, at_risk on the record), else
// now plus its ETA at the current speed; an ended job's result.
func deadlineRows(t *table, j jobs.Job, now time.Time) {
	if !j.Spec.HasDeadline() {
		return
	}
	due := j.Spec.DeadlineAt(j.CreatedAt)
	if j.Deadline != nil {
		due = *j.Deadline
	}
	policy := j.Spec.DeadlinePolicy
	if policy == "" {
		policy = jobs.DeadlineStrict
	}
	t.row("Deadline:", fmt.Sprintf("%s (%s)", due.UTC().Format(time.RFC3339), policy))
	switch r := j.DeadlineResult; {
	case j.State == jobs.Failed:
		t.row("Result:", "missed: the job failed")
	case j.State == jobs.Succeeded:
		// The planner's record of the end (what its deadline event
		// says); before its teardown, the record's last write.
		fin, met := j.UpdatedAt, !j.UpdatedAt.After(due)
		if r != nil {
			fin, met = r.Finished, r.Met
		}
		if met {
			t.row("Result:", fmt.Sprintf("met, %s early", max(due.Sub(fin).Round(time.Second), 0)))
		} else {
			t.row("Result:", fmt.Sprintf("missed by %s", fin.Sub(due).Round(time.Second)))
		}
	case j.State.Terminal():
	case j.ExpectedFinish != nil:
		t.row("Expected finish:", j.ExpectedFinish.UTC().Format(time.RFC3339)+atRisk(j.AtRisk))
	case j.AtRisk:
		t.row("Expected finish:", "none planned (at risk)")
	case eta(j) > 0:
		fin := now.Add(eta(j))
		t.row("Expected finish:", fin.UTC().Format(time.RFC3339)+atRisk(fin.After(due)))
	}
}

func atRisk(b bool) string {
	if b {
		return " (at risk)"
	}
	return ""
}
