package planner

import (
	"github.com/edl-nomad/edl/jobs"
	"testing"
	"time"
)

func TestConfigForCluster(t *testing.T) {
	d := DefaultConfig()
	d.QueueThresholdPerGPU = 3600.0 / 128
	tests := []struct {
		name string
		c    Config
		gpus int
		want float64
	}{
		{"default: absolute", DefaultConfig(), 16, 3600},
		{"1 GPU-hour on 128 GPUs", d, 128, 3600},
		{"on 16 GPUs: 450 s", d, 16, 450},
		{"on 1,024 GPUs: 8 GPU-hours", d, 1024, 8 * 3600},
		{"no per-GPU threshold: absolute", Config{QueueThreshold: 4 * 3600}, 16, 4 * 3600},
		{"ordering off stays off", Config{QueueThreshold: -1, QueueThresholdPerGPU: 10}, 16, -1},
		{"no GPUs: as set", d, 0, 3600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.ForCluster(tc.gpus).QueueThreshold; got != tc.want {
				t.Errorf("QueueThreshold on %d GPUs = %g, want %g", tc.gpus, got, tc.want)
			}
		})
	}
}

// The queues are relative to the cluster: 1,000 GPU seconds of attained
// service are the first queue on 128 GPUs (threshold 3,600 s) but the third
// on 8 (225 s, x2 per queue), where a later job with none goes first.
func TestDecideQueuesScaleWithCluster(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		first string
	}{{1, "b"}, {16, "a"}} {
		s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", tc.nodes, 8, v100)}, Config: DefaultConfig()}
		s.Config.QueueThresholdPerGPU = 3600.0 / 128
		// Each job needs the whole cluster, so only one runs.
		all := tc.nodes * 8
		s.Jobs = []JobState{
			job("a", all, all, attained(1000)),
			job("b", all, all, submitted(time.Minute)),
		}
		p := Decide(s, t0)
		if err := checkPlan(s, p); err != nil {
			t.Fatal(err)
		}
		if workersOf(t, p, tc.first) != all {
			t.Errorf("%d GPUs: %s should run first: %+v", all, tc.first, p.Targets)
		}
	}
}
