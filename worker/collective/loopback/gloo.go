package loopback

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/edl-nomad/edl/internal/freeport"
)

// glooScript is the reference: the same all-reduce with torch.distributed's
// gloo backend, one process per rank, each printing its timings as JSON.
const glooScript = `import json, resource, sys, time
import torch, torch.distributed as dist
rank, world, port, floats, warmup, iters = (int(a) for a in sys.argv[1:7])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
t = torch.full((floats,), 0.001, dtype=torch.float32)
times = []
cpu = 0.0
for i in range(warmup + iters):
    if i == warmup:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu = -(ru.ru_utime + ru.ru_stime)
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(t)
    if i >= warmup:
        times.append((time.perf_counter() - t0) * 1e3)
ru = resource.getrusage(resource.RUSAGE_SELF)
cpu += ru.ru_utime + ru.ru_stime
print(json.dumps({"rank": rank, "times_ms": times, "cpu_ms": cpu * 1e3}), flush=True)
dist.destroy_process_group()
`

// HaveTorch reports whether python can import torch.
func HaveTorch(ctx context.Context, python string) bool {
	return exec.CommandContext(ctx, python, "-c", "import torch.distributed").Run() == nil
}

// Gloo times the same all-reduce as Bench with torch.distributed (gloo).
func Gloo(ctx context.Context, python string, procs, mib, warmup, iters int) (BenchResult, error) {
	dir, err := os.MkdirTemp("", "edl-gloo-")
	if err != nil {
		return BenchResult{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "gloo_allreduce.py")
	if err := os.WriteFile(script, []byte(glooScript), 0o600); err != nil {
		return BenchResult{}, err
	}
	port, err := freeport.Loopback()
	if err != nil {
		return BenchResult{}, err
	}
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	errs := make([]*bytes.Buffer, procs)
	for rank := range procs {
		cmd := exec.CommandContext(ctx, python, script, strconv.Itoa(rank), strconv.Itoa(procs), strconv.Itoa(port),
			strconv.Itoa(mib<<20/4), strconv.Itoa(warmup), strconv.Itoa(iters))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		outs[rank], errs[rank] = &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[rank], errs[rank]
		if err := cmd.Start(); err != nil {
			return BenchResult{}, fmt.Errorf("start gloo rank %d: %w", rank, err)
		}
		cmds[rank] = cmd
	}
	var firstErr error
	for rank, cmd := range cmds {
		if err := cmd.Wait(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("gloo rank %d: %w: %s", rank, err, lastLine(errs[rank].Bytes()))
		}
	}
	if firstErr != nil {
		return BenchResult{}, firstErr
	}
	iterMax := make([]float64, iters)
	cpu := 0.0
	for rank, out := range outs {
		var rep struct {
			TimesMS []float64 `json:"times_ms"`
			CPUMS   float64   `json:"cpu_ms"`
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			_ = json.Unmarshal(sc.Bytes(), &rep)
		}
		if len(rep.TimesMS) != iters {
			return BenchResult{}, fmt.Errorf("gloo rank %d reported %d timings, want %d", rank, len(rep.TimesMS), iters)
		}
		for i, ms := range rep.TimesMS {
			iterMax[i] = max(iterMax[i], ms)
		}
		cpu += rep.CPUMS
	}
	res := resultFrom(procs, mib, iterMax)
	res.GlooCPUMSPerOp = round(cpu / float64(iters))
	return res, nil
}

func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(b)
}
