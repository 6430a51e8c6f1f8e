package gpustat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestVisibleGPUs(t *testing.T) {
	tests := []struct {
		nvidia, cuda string
		want         []string
	}{
		{"", "", nil},
		{"void", "", nil},
		{"all", "", nil},
		{"GPU-aaa,GPU-bbb", "0", []string{"GPU-aaa", "GPU-bbb"}},
		{"", "1, 3", []string{"1", "3"}},
		{"none", "0", nil},
	}
	for _, tc := range tests {
		env := map[string]string{"NVIDIA_VISIBLE_DEVICES": tc.nvidia, "CUDA_VISIBLE_DEVICES": tc.cuda}
		if got := VisibleGPUs(func(k string) string { return env[k] }); !slices.Equal(got, tc.want) {
			t.Errorf("NVIDIA=%q CUDA=%q: %v, want %v", tc.nvidia, tc.cuda, got, tc.want)
		}
	}
}

type recStore struct{ got []jobs.WorkerGPUStats }

func (r *recStore) SetWorkerGPUStats(_ context.Context, _ string, st jobs.WorkerGPUStats) error {
	r.got = append(r.got, st)
	return nil
}

// Without NVML nothing is reported and Report returns at once; with it
// (a GPU machine), the GPU named is read.
func TestReadAndReport(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stats, err := Read([]string{"0"})
	var st recStore
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	switch {
	case errors.Is(err, ErrNoNVML):
		start := time.Now()
		Report(ctx, &st, "j-x", "w0", []string{"0"}, time.Hour, log)
		if len(st.got) != 0 || time.Since(start) > time.Second {
			t.Fatalf("without NVML: %d reports, returned after %s", len(st.got), time.Since(start))
		}
	case err != nil:
		t.Skipf("NVML present, GPU 0 unreadable: %v", err)
	default:
		if len(stats) != 1 || stats[0].UUID == "" || stats[0].MemoryTotalBytes == 0 {
			t.Fatalf("GPU 0: %+v", stats)
		}
		cctx, ccancel := context.WithCancel(ctx)
		go func() { time.Sleep(200 * time.Millisecond); ccancel() }()
		Report(cctx, &st, "j-x", "w0", []string{"0"}, time.Hour, log)
		if len(st.got) != 1 || st.got[0].Worker != "w0" {
			t.Fatalf("reports %+v", st.got)
		}
	}
	// no GPUs: nothing to do, whatever the machine
	st.got = nil
	Report(ctx, &st, "j-x", "w0", nil, time.Hour, log)
	if len(st.got) != 0 {
		t.Fatalf("reported for a worker without GPUs")
	}
}
