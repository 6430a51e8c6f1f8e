//go:build unix

package trainer

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// benchConfig is a 1.05M-parameter model, the elastic benchmark's size.
var benchConfig = ModelConfig{Inputs: 512, Hidden: []int{1024, 512}, Classes: 10, Seed: 1}

func BenchmarkGradient(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("params=%d/batch=64/threads=%d", benchConfig.NumParams(), threads), func(b *testing.B) {
			cfg := benchConfig
			cfg.Threads = threads
			m := mustModel(b, cfg)
			d, err := NewDataset(jobs.SyntheticDataset{Seed: 1, Samples: 1 << 16, Features: cfg.Inputs, Classes: cfg.Classes, Partitions: 16})
			if err != nil {
				b.Fatal(err)
			}
			const n = 64
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = int64(i)
			}
			x, labels := make([]float32, n*cfg.Inputs), make([]int32, n)
			d.Batch(ids, x, labels)
			grad := make([]float32, m.NumParams())
			o := NewSGD(m.NumParams(), 0.01, 0.9)
			cpu0 := cpuTime()
			for b.Loop() {
				clear(grad)
				m.Gradient(x, labels, n, grad)
				o.Step(m.Params(), grad)
			}
			// CPU time, not wall time, is the figure that survives a shared
			// machine: the benchmark host runs several processes per core.
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "samples/cpu-s")
		})
	}
}

func BenchmarkSample(b *testing.B) {
	d, err := NewDataset(jobs.SyntheticDataset{Seed: 1, Samples: 1 << 20, Features: 512, Classes: 10, Partitions: 16})
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, 512)
	var id int64
	for b.Loop() {
		d.Sample(id, x)
		id = (id + 1) & (1<<20 - 1)
	}
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
