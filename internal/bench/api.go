package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/edl-nomad/edl/api/apibench"
	"github.com/edl-nomad/edl/internal/cli"
)

func benchAPI(ctx context.Context, _ Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench api", `Starts its own redis-server (appendonly yes, appendfsync everysec) and the API on
loopback ports, then measures, each for --duration:
  closed loop: --clients clients, each sending its next request when the last is
    answered: submits (--spec), gets of random submitted jobs, list pages of 50
    (submit_per_s, submit_p99_ms, get_per_s, get_p99_ms, list_per_s);
  open loop: requests due at a fixed rate (--submit-rate, --get-rate; 0 skips),
    sent by up to --open-workers workers, latency counted from each request's due
    time (submit_open_*, get_open_*; *_open_per_s is the rate achieved);
  with --sse-streams idle event streams open: gets open loop at --sse-get-rate
    (get_sse_*), and the status of /readyz then (readyz_sse_code).
Both are reported because they answer different questions. A closed loop finds
the most the server sustains, but its latency is tied to its rate (Little's law:
64 clients at 3,000/s wait 64/3000 = 21 ms on average), and a client that stalls
stops sending, so stalls hide (coordinated omission). The open loop holds the
offered load fixed, as independent users do, and shows the latency at that rate,
stalls and queueing included; if the server falls behind, its p99 grows.`, stderr)
	clients := fs.Int("clients", 64, "concurrent closed-loop HTTP clients")
	duration := fs.Duration("duration", 3*time.Second, "length of each phase")
	specFile := fs.String("spec", "examples/job.json", "job spec to submit")
	submitRate := fs.Float64("submit-rate", 3000, "open-loop submits per second (0 skips)")
	getRate := fs.Float64("get-rate", 8000, "open-loop gets per second (0 skips)")
	openWorkers := fs.Int("open-workers", 256, "most open-loop requests in flight")
	sseStreams := fs.Int("sse-streams", 500, "idle event streams held open for the get_sse_* phase (0 skips)")
	sseGetRate := fs.Float64("sse-get-rate", 1000, "open-loop gets per second while the event streams are open")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the API and clients (one process) to this file")
	asJSON := fs.Bool("json", false, "print one JSON line")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *clients < 1 || *duration <= 0 || *submitRate < 0 || *getRate < 0 || *openWorkers < 1 || *sseStreams < 0 || *sseGetRate <= 0 {
		return cli.Usagef("bench api: --clients and --open-workers must be >= 1, --duration positive, rates >= 0 (--sse-get-rate > 0), --sse-streams >= 0")
	}
	spec, err := os.ReadFile(*specFile)
	if err != nil {
		return cli.Usagef("bench api: --spec: %v", err)
	}
	_, rdb, stopRedis, err := startRedis(ctx, "bench api", "edl-bench-api-", 4**clients)
	if err != nil {
		return err
	}
	defer stopRedis()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return cli.Usagef("bench api: --cpuprofile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench api: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := apibench.Run(ctx, apibench.Config{Redis: rdb, Clients: *clients, Duration: *duration, Spec: spec,
		SubmitRate: *submitRate, GetRate: *getRate, OpenWorkers: *openWorkers, SSEStreams: *sseStreams, SSEGetRate: *sseGetRate,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return fmt.Errorf("bench api: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "jobs API, %d clients, %.0f s per phase (%d errors)\n", res.Clients, res.PhaseS, res.Errors)
	fmt.Fprintf(stdout, "  submit  %8.0f /s   p50 %6.2f ms   p99 %6.2f ms\n", res.SubmitPerS, res.SubmitP50Ms, res.SubmitP99Ms)
	fmt.Fprintf(stdout, "  get     %8.0f /s   p50 %6.2f ms   p99 %6.2f ms\n", res.GetPerS, res.GetP50Ms, res.GetP99Ms)
	fmt.Fprintf(stdout, "  list    %8.0f /s   (pages of %d)      p99 %6.2f ms\n", res.ListPerS, res.ListLimit, res.ListP99Ms)
	fmt.Fprintf(stdout, "open loop, up to %d in flight, latency from each request's due time\n", res.OpenWorkers)
	fmt.Fprintf(stdout, "  submit  %8.0f /s offered %8.0f /s achieved   p50 %6.2f ms   p99 %6.2f ms\n", res.SubmitOpenRate, res.SubmitOpenPerS, res.SubmitOpenP50Ms, res.SubmitOpenP99Ms)
	fmt.Fprintf(stdout, "  get     %8.0f /s offered %8.0f /s achieved   p50 %6.2f ms   p99 %6.2f ms\n", res.GetOpenRate, res.GetOpenPerS, res.GetOpenP50Ms, res.GetOpenP99Ms)
	if res.SSEStreams > 0 {
		fmt.Fprintf(stdout, "with %d idle event streams open (/readyz %d)\n", res.SSEStreams, res.ReadyzSSECode)
		fmt.Fprintf(stdout, "  get     %8.0f /s offered %8.0f /s achieved   p50 %6.2f ms   p99 %6.2f ms\n", res.GetSSERate, res.GetSSEPerS, res.GetSSEP50Ms, res.GetSSEP99Ms)
	}
	return nil
}
