package loop

import (
	"testing"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner/clustertest"
)

// The loop's test fake keeps the same contract as the real clusters.
func TestFakeClusterContract(t *testing.T) {
	clustertest.Run(t, clustertest.Backend{
		New: func(t *testing.T) clustertest.Cluster { return newFakeCluster(4) },
		Job: func(id string) jobs.Job {
			return jobs.Job{ID: id, Tenant: "t", Spec: jobs.Spec{Workers: jobs.WorkerRange{Min: 1, Max: 3}}}
		},
	})
}
