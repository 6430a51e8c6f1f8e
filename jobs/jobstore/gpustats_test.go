package jobstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestWorkerGPUStats(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Now()
	for _, st := range []jobs.WorkerGPUStats{
		{Worker: "w1", Time: now, GPUs: []jobs.GPUStat{{UUID: "GPU-b", PowerWatts: 100}}},
		{Worker: "w0", Time: now.Add(-time.Second), GPUs: []jobs.GPUStat{{UUID: "GPU-a", UtilizationRatio: 0.5}}},
		{Worker: "w2", Time: now.Add(-time.Hour), GPUs: []jobs.GPUStat{{UUID: "GPU-c"}}},
		{Worker: "w1", Time: now, GPUs: []jobs.GPUStat{{UUID: "GPU-b", PowerWatts: 200}}}, // replaces w1's
	} {
		if err := s.SetWorkerGPUStats(ctx, "j-gpu", st); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.WorkerGPUStats(ctx, "j-gpu", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Worker != "w0" || got[1].Worker != "w1" || got[1].GPUs[0].PowerWatts != 200 || got[0].GPUs[0].UtilizationRatio != 0.5 {
		t.Fatalf("reports %+v, want w0 and w1's latest (w2 too old)", got)
	}
	if _, err := s.WorkerGPUStats(ctx, "../x", now, time.Minute); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("bad ID: %v", err)
	}
	if got, err := s.WorkerGPUStats(ctx, "j-none", now, time.Minute); err != nil || len(got) != 0 {
		t.Errorf("no reports: %v %v", got, err)
	}
}
