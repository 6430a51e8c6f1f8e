package nomadtest

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStopOrPurgeLeavesFinishedAllocationsAlone: stopping or purging a job
// stops its live allocations only; one that already finished keeps its
// desired status "run" (Nomad's reconciler drops terminal allocations
// before it marks the rest "alloc not needed").
func TestStopOrPurgeLeavesFinishedAllocationsAlone(t *testing.T) {
	for _, purge := range []bool{false, true} {
		t.Run(fmt.Sprintf("purge=%v", purge), func(t *testing.T) {
			s := New(t, Config{})
			c := s.Client()
			if _, _, err := c.Jobs().Register(batchJob("g", 2, gpus(1)), nil); err != nil {
				t.Fatal(err)
			}
			settle(t, s)
			var id string
			for _, a := range s.Allocations("default", "g") {
				if a.Name == "g.workers[1]" {
					id = a.ID
				}
			}
			a, _, err := c.Allocations().Info(id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Allocations().Signal(a, nil, "worker", "SIGTERM"); err != nil {
				t.Fatal(err)
			}
			settle(t, s)
			if _, _, err := c.Jobs().Deregister("g", purge, nil); err != nil {
				t.Fatal(err)
			}
			settle(t, s)
			var got []string
			for _, a := range s.Allocations("default", "g") {
				got = append(got, fmt.Sprintf("%s %s/%s", a.Name, a.DesiredStatus, a.ClientStatus))
			}
			sort.Strings(got)
			want := []string{"g.workers[0] stop/complete", "g.workers[1] run/complete"}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("allocations after deregister (-want +got):\n%s", d)
			}
		})
	}
}
