package main

import (
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// deadlineRows adds a deadline job's deadline and expected finish (now plus
// its ETA at the current speed) to edl get's table.
func deadlineRows(t *table, j jobs.Job, now time.Time) {
	if !j.Spec.HasDeadline() {
		return
	}
	due := j.Spec.DeadlineAt(j.CreatedAt)
	policy := j.Spec.DeadlinePolicy
	if policy == "" {
		policy = jobs.DeadlineStrict
	}
	t.row("Deadline:", fmt.Sprintf("%s (%s)", due.UTC().Format(time.RFC3339), policy))
	d := eta(j)
	switch {
	case j.State == jobs.Succeeded:
		fin := j.UpdatedAt
		if fin.After(due) {
			t.row("Result:", fmt.Sprintf("missed by %s", fin.Sub(due).Round(time.Second)))
		} else {
			t.row("Result:", fmt.Sprintf("met, %s early", due.Sub(fin).Round(time.Second)))
		}
	case d > 0:
		fin := now.Add(d)
		risk := ""
		if fin.After(due) {
			risk = " (at risk)"
		}
		t.row("Expected finish:", fin.UTC().Format(time.RFC3339)+risk)
	}
}
