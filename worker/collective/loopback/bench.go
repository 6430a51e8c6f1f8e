package loopback

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"time"
)

// BenchConfig is one `edl bench allreduce` run for one process count.
type BenchConfig struct {
	Procs      int
	MiB        int
	Warmup     int
	Iters      int
	Timeout    time.Duration
	ChunkBytes int
	// Compression is "none" or "fp16".
	Compression string
	// Command makes the child of a rank: a program that calls Serve.
	Command func(rank int) *exec.Cmd
}

// BenchResult is one line of the benchmark's output.
type BenchResult struct {
	Procs       int     `json:"procs"`
	MiB         int     `json:"mib"`
	Compression string  `json:"compression,omitempty"`
	AlgBWGbps   float64 `json:"algbw_gbps"`
	BusBWGbps   float64 `json:"busbw_gbps"`
	P50MS       float64 `json:"p50_ms"`
	MinMS       float64 `json:"min_ms"`
	Iters       int     `json:"iters"`
	// CPU time per all-reduce, summed over the processes: what the wall
	// time cannot go below once divided by the cores.
	UserMSPerOp    float64 `json:"cpu_user_ms_per_op"`
	SysMSPerOp     float64 `json:"cpu_sys_ms_per_op"`
	GlooAlgBWGbps  float64 `json:"gloo_algbw_gbps,omitempty"`
	GlooP50MS      float64 `json:"gloo_p50_ms,omitempty"`
	RatioVsGloo    float64 `json:"ratio_vs_gloo,omitempty"`
	GlooCPUMSPerOp float64 `json:"gloo_cpu_ms_per_op,omitempty"`
	GlooError      string  `json:"gloo_error,omitempty"`
}

// Bench times AllReduce of MiB mebibytes of float32 across Procs processes.
// An iteration's time is the slowest rank's; the figures use the median.
func Bench(ctx context.Context, cfg BenchConfig) (BenchResult, error) {
	if err := cfg.Validate(); err != nil {
		return BenchResult{}, err
	}
	floats := cfg.MiB << 20 / 4
	g, err := Start(ctx, cfg.Procs, "bench-allreduce", cfg.Command)
	if err != nil {
		return BenchResult{}, err
	}
	defer g.Close()
	if err := g.Send(Task{
		Kind: KindBench, Generation: 1, TimeoutMS: int(cfg.Timeout.Milliseconds()),
		ChunkBytes: cfg.ChunkBytes, Compression: cfg.Compression, Floats: floats, Warmup: cfg.Warmup, Iters: cfg.Iters,
	}); err != nil {
		return BenchResult{}, err
	}
	reps, err := g.Collect(ctx, cfg.Procs)
	if err != nil {
		return BenchResult{}, err
	}
	iterMax := make([]float64, cfg.Iters)
	var user, sys float64
	for rank, r := range reps {
		if r.Err != nil || r.Error != "" {
			return BenchResult{}, fmt.Errorf("rank %d: %v%s (stderr: %s)", rank, r.Err, r.Error, g.Stderr(rank))
		}
		if len(r.TimesMS) != cfg.Iters {
			return BenchResult{}, fmt.Errorf("rank %d reported %d timings, want %d", rank, len(r.TimesMS), cfg.Iters)
		}
		for i, ms := range r.TimesMS {
			iterMax[i] = max(iterMax[i], ms)
		}
		user, sys = user+r.UserMS, sys+r.SysMS
	}
	res := resultFrom(cfg.Procs, cfg.MiB, iterMax)
	if cfg.Compression != "none" {
		res.Compression = cfg.Compression
	}
	res.UserMSPerOp, res.SysMSPerOp = round(user/float64(cfg.Iters)), round(sys/float64(cfg.Iters))
	return res, nil
}

func resultFrom(procs, mib int, timesMS []float64) BenchResult {
	p50, lo := Median(timesMS), slices.Min(timesMS)
	alg := 0.0
	if p50 > 0 {
		alg = float64(mib<<20) / (p50 / 1e3) / 1e9
	}
	return BenchResult{
		Procs:     procs,
		MiB:       mib,
		AlgBWGbps: round(alg),
		BusBWGbps: round(alg * 2 * float64(procs-1) / float64(procs)),
		P50MS:     round(p50),
		MinMS:     round(lo),
		Iters:     len(timesMS),
	}
}

// Median of xs (not modified).
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func round(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// Validate names the field at fault.
func (c BenchConfig) Validate() error {
	switch {
	case c.Procs < 1:
		return fmt.Errorf("loopback bench: Procs %d: must be at least 1", c.Procs)
	case c.MiB < 1:
		return fmt.Errorf("loopback bench: MiB %d: must be at least 1", c.MiB)
	case c.Warmup < 0 || c.Iters < 1:
		return fmt.Errorf("loopback bench: Warmup %d, Iters %d: need Warmup >= 0 and Iters >= 1", c.Warmup, c.Iters)
	case c.Command == nil:
		return errors.New("loopback bench: Command: required")
	}
	return nil
}
