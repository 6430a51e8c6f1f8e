package jobstore_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

// TestServiceHistoryKeepsSucceededJobsOnce: the planner's cleanup of a
// succeeded job adds its service once (a second cleanup write adds
// nothing), failed and cancelled jobs add none, and the list is capped.
func TestServiceHistoryKeepsSucceededJobsOnce(t *testing.T) {
	ctx := context.Background()
	r := testenv.NewRedis(t)
	s := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	key := r.Prefix + "service"
	end := func(to jobs.State, attained float64) {
		t.Helper()
		j, _, err := s.Create(ctx, "t", spec("a", nil), "")
		if err != nil {
			t.Fatal(err)
		}
		steps := map[jobs.State][]jobs.State{
			jobs.Succeeded: {jobs.Starting, jobs.Running, jobs.Succeeded},
			jobs.Failed:    {jobs.Starting, jobs.Running, jobs.Failed},
			jobs.Cancelled: {jobs.Cancelling, jobs.Cancelled},
		}[to]
		for _, st := range steps {
			if _, err := s.Transition(ctx, j.ID, st, ""); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 { // the cleanup, then a write after it (a callback's outcome)
			if _, err := s.Update(ctx, j.ID, func(j *jobs.Job) error {
				j.Planner = &jobs.PlannerState{AttainedGPUSeconds: attained, TornDown: true, Finished: true}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	end(jobs.Succeeded, 120)
	end(jobs.Failed, 50)
	end(jobs.Cancelled, 70)
	end(jobs.Succeeded, 0) // never ran: nothing to learn
	end(jobs.Succeeded, 3600.5)
	got, err := s.ServiceHistory(ctx)
	if err != nil || !slices.Equal(got, []float64{3600.5, 120}) {
		t.Fatalf("ServiceHistory = %v, %v; want [3600.5 120]", got, err)
	}

	// Capped at the newest jobstore.ServiceHistoryMax.
	for i := range jobstore.ServiceHistoryMax + 5 {
		r.Client.LPush(ctx, key, strconv.Itoa(i+1))
	}
	end(jobs.Succeeded, 7)
	got, err = s.ServiceHistory(ctx)
	if err != nil || len(got) != jobstore.ServiceHistoryMax || got[0] != 7 || got[1] != jobstore.ServiceHistoryMax+5 {
		t.Fatalf("capped history: %d entries, first %v, %v; want %d, [7 %d ...]", len(got), got[:2], err, jobstore.ServiceHistoryMax, jobstore.ServiceHistoryMax+5)
	}
	if n := r.Client.LLen(ctx, key).Val(); n != jobstore.ServiceHistoryMax {
		t.Fatalf("the list holds %d entries, want %d", n, jobstore.ServiceHistoryMax)
	}

	// A corrupt entry is named.
	r.Client.LPush(ctx, key, "abc")
	if _, err := s.ServiceHistory(ctx); err == nil || !strings.Contains(err.Error(), `"abc"`) {
		t.Fatalf("corrupt entry: err = %v, want one naming it", err)
	}
}
