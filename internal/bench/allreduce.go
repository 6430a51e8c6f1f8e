package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/worker/collective"
	"github.com/edl-nomad/edl/worker/collective/loopback"
)

func benchAllReduce(ctx context.Context, _ Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench allreduce", "Times AllReduce of --mib MiB of float32 across each --procs count of edl processes on loopback,\nand the same with torch.distributed gloo when --python can import torch.", stderr)
	procs := fs.String("procs", "2,4", "comma-separated process counts")
	mib := fs.Int("mib", 64, "vector size in MiB")
	warmup := fs.Int("warmup", 2, "untimed iterations")
	iters := fs.Int("iters", 10, "timed iterations")
	chunkKiB := fs.Int("chunk-kib", 0, "all-reduce piece size in KiB (0: the default)")
	compression := fs.String("compression", "none", "values on the wire: none (float32) or fp16")
	python := fs.String("python", "/usr/bin/python3", "python with torch for the gloo comparison (empty: skip)")
	timeout := fs.Duration("timeout", 30*time.Second, "per-operation peer timeout")
	asJSON := fs.Bool("json", false, "print one JSON line per process count")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	counts, bad, ok := intList(*procs, func(n int) bool { return n >= 2 && n <= 64 })
	if !ok {
		return cli.Usagef("bench allreduce: invalid value %q for flag --procs: want counts in 2..64 (one process has nothing to reduce)", bad)
	}
	if _, err := collective.ParseCompression(*compression); err != nil {
		return cli.Usagef("bench allreduce: invalid value %q for flag --compression: want none or fp16", *compression)
	}
	if *mib < 1 {
		return cli.Usagef("bench allreduce: invalid value %d for flag --mib: want >= 1", *mib)
	}
	if *iters < 1 || *warmup < 0 {
		return cli.Usagef("bench allreduce: --iters must be >= 1 and --warmup >= 0")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench allreduce: find own binary: %w", err)
	}
	torch := *python != "" && loopback.HaveTorch(ctx, *python)
	for _, n := range counts {
		res, err := loopback.Bench(ctx, loopback.BenchConfig{
			Procs: n, MiB: *mib, Warmup: *warmup, Iters: *iters, Timeout: *timeout, ChunkBytes: *chunkKiB << 10, Compression: *compression,
			Command: func(int) *exec.Cmd { return exec.CommandContext(ctx, exe, "collective-peer") },
		})
		if err != nil {
			return fmt.Errorf("bench allreduce procs=%d: %w", n, err)
		}
		if torch {
			g, err := loopback.Gloo(ctx, *python, n, *mib, *warmup, *iters)
			if err != nil {
				res.GlooError = err.Error()
			} else {
				res.GlooAlgBWGbps, res.GlooP50MS, res.GlooCPUMSPerOp = g.AlgBWGbps, g.P50MS, g.GlooCPUMSPerOp
				res.RatioVsGloo = float64(int64(res.AlgBWGbps/g.AlgBWGbps*1000+0.5)) / 1000
			}
		}
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(res); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(stdout, "procs=%d mib=%d algbw=%.3f GB/s busbw=%.3f GB/s p50=%.2f ms", res.Procs, res.MiB, res.AlgBWGbps, res.BusBWGbps, res.P50MS)
		if res.GlooAlgBWGbps > 0 {
			fmt.Fprintf(stdout, " gloo_algbw=%.3f GB/s ratio=%.2f", res.GlooAlgBWGbps, res.RatioVsGloo)
		} else if res.GlooError != "" {
			fmt.Fprintf(stdout, " gloo_error=%q", res.GlooError)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}
