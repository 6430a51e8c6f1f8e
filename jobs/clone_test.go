package jobs

import (
	"testing"
	"time"
)

// TestJobCloneIsDeep: writing through a clone's pointers and maps leaves
// the original as it was.
func TestJobCloneIsDeep(t *testing.T) {
	at := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	j := Job{ID: "j", Spec: Spec{Labels: map[string]string{"team": "a"}},
		LastCheckpoint: &CheckpointRef{Step: 3}, Planner: &PlannerState{AttainedGPUSeconds: 5, Throughput: map[int]float64{1: 10}},
		Deadline: &at, ExpectedFinish: &at}
	c := j.Clone()
	c.Spec.Labels["team"] = "b"
	c.LastCheckpoint.Step = 9
	c.Planner.AttainedGPUSeconds, c.Planner.Throughput[1] = 7, 20
	*c.Deadline, *c.ExpectedFinish = at.Add(time.Hour), at.Add(time.Hour)
	if j.Spec.Labels["team"] != "a" || j.LastCheckpoint.Step != 3 || j.Planner.AttainedGPUSeconds != 5 ||
		j.Planner.Throughput[1] != 10 || !j.Deadline.Equal(at) || !j.ExpectedFinish.Equal(at) {
		t.Fatalf("the original changed through its clone: %+v, checkpoint %+v, planner %+v", j, *j.LastCheckpoint, *j.Planner)
	}
	if z := (Job{}).Clone(); z.LastCheckpoint != nil || z.Planner != nil || z.Deadline != nil {
		t.Fatalf("clone of a zero job = %+v; want nil pointers kept nil", z)
	}
}
