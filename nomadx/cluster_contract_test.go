package nomadx_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/nomadx/nomadtest"
	"github.com/edl-nomad/edl/planner/clustertest"
)

// nomadx.Cluster on the fake Nomad agent keeps the loop.Cluster
// contract.
func TestClusterContract(t *testing.T) {
	clustertest.Run(t, clustertest.Backend{
		New: func(t *testing.T) clustertest.Cluster {
			srv := nomadtest.New(t, nomadtest.Config{})
			cfg := nomadx.DefaultConfig()
			cfg.Address = srv.URL()
			cfg.RedisURL, cfg.StoreURL, cfg.Command = "redis://10.0.0.5:6379/0", "s3://ckpt/edl", "/usr/local/bin/edl"
			cfg.CPUMHz, cfg.MemoryMiB = 500, 1024
			cfg.Retry.BaseDelay, cfg.Retry.MaxDelay, cfg.Retry.Timeout = time.Millisecond, 5*time.Millisecond, 2*time.Second
			c, err := nomadx.New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		Job: func(id string) jobs.Job {
			return jobs.Job{ID: id, Tenant: "t", Spec: jobs.Spec{Name: id, Workers: jobs.WorkerRange{Min: 1, Max: 3},
				GPUsPerWorker: 1, Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin}}}
		},
	})
}
