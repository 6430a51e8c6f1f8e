package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/local"
	"github.com/edl-nomad/edl/planner/clustertest"
)

// local.Cluster keeps the loop.Cluster contract, with workers that are
// plain sleeping processes.
func TestClusterContract(t *testing.T) {
	clustertest.Run(t, clustertest.Backend{
		New: func(t *testing.T) clustertest.Cluster {
			c, err := local.New(local.Config{
				Command:    []string{"/bin/sh", "-c", "exec sleep 600", "worker"},
				WorkerArgs: func(jobs.Job, int, string) []string { return nil },
				LogDir:     t.TempDir(),
				Slots:      4,
				Grace:      2 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = c.Close(ctx)
			})
			return c
		},
		Job: func(id string) jobs.Job {
			return jobs.Job{ID: id, Tenant: "t", Spec: jobs.Spec{Workers: jobs.WorkerRange{Min: 1, Max: 3}}}
		},
	})
}
