package apibench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/redis/go-redis/v9"
)

// Config says what to measure.
type Config struct {
	Redis    redis.UniversalClient
	Prefix   string        // key prefix (default "edl-bench:")
	Clients  int           // concurrent closed-loop HTTP clients (default 64)
	Duration time.Duration // per phase (default 3s)
	Spec     []byte        // the job submitted (JSON)
	// SubmitRate and GetRate are the open-loop arrival rates per second
	// (0 skips that open-loop phase).
	SubmitRate, GetRate float64
	// OpenWorkers caps the requests in flight in an open-loop phase
	// (default 256); requests beyond it wait, their wait counted.
	OpenWorkers int
	// SSEStreams idle event streams are held open (default 0: none) while
	// gets are sent open loop at SSEGetRate per second (default 1,000).
	SSEStreams int
	SSEGetRate float64
	Logger     *slog.Logger
}

// Result is what `edl bench api --json` prints. The closed-loop figures
// come from Clients clients each sending its next request on the answer to
// the last; the open-loop ones (fields *_open_*) from requests sent at a
// fixed arrival rate, latency counted from each one's due time.
type Result struct {
	Clients     int     `json:"clients"`
	PhaseS      float64 `json:"phase_s"`
	Submits     int     `json:"submits"`
	SubmitPerS  float64 `json:"submit_per_s"`
	SubmitP50Ms float64 `json:"submit_p50_ms"`
	SubmitP99Ms float64 `json:"submit_p99_ms"`
	GetPerS     float64 `json:"get_per_s"`
	GetP50Ms    float64 `json:"get_p50_ms"`
	GetP99Ms    float64 `json:"get_p99_ms"`
	ListPerS    float64 `json:"list_per_s"`
	ListP99Ms   float64 `json:"list_p99_ms"`
	ListLimit   int     `json:"list_limit"`

	SubmitOpenRate  float64 `json:"submit_open_rate"`
	SubmitsOpen     int     `json:"submits_open"`
	SubmitOpenPerS  float64 `json:"submit_open_per_s"`
	SubmitOpenP50Ms float64 `json:"submit_open_p50_ms"`
	SubmitOpenP99Ms float64 `json:"submit_open_p99_ms"`
	GetOpenRate     float64 `json:"get_open_rate"`
	GetOpenPerS     float64 `json:"get_open_per_s"`
	GetOpenP50Ms    float64 `json:"get_open_p50_ms"`
	GetOpenP99Ms    float64 `json:"get_open_p99_ms"`
	OpenWorkers     int     `json:"open_workers"`
	// CPU microseconds of this process (API server and load generator,
	// not Redis) per closed-loop request: steadier than rates on a
	// machine shared with other work.
	// Gets while SSEStreams idle event streams are open, open loop at
	// GetSSERate per second (0s when skipped); ReadyzSSE is the status of
	// /readyz then.
	SSEStreams    int     `json:"sse_streams"`
	GetSSERate    float64 `json:"get_sse_rate"`
	GetSSEPerS    float64 `json:"get_sse_per_s"`
	GetSSEP50Ms   float64 `json:"get_sse_p50_ms"`
	GetSSEP99Ms   float64 `json:"get_sse_p99_ms"`
	ReadyzSSECode int     `json:"readyz_sse_code"`
	SubmitCPUUs   float64 `json:"submit_cpu_us"`
	GetCPUUs      float64 `json:"get_cpu_us"`
	Errors        int64   `json:"errors"`
}

const (
	benchToken = "edl-bench-token"
	listLimit  = 50
)

// Run serves the API on a loopback port and measures its phases in turn:
// closed-loop submit, get and list, then open-loop submit and get.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 64
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 3 * time.Second
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "edl-bench:"
	}
	if cfg.OpenWorkers <= 0 {
		cfg.OpenWorkers = 256
	}
	if _, err := jobs.DecodeSpec(cfg.Spec); err != nil {
		return Result{}, fmt.Errorf("bench spec: %w", err)
	}
	tenants, err := jobs.NewTenants(jobs.Tenant{Name: "bench", TokenSHA256: jobs.HashToken(benchToken), RatePerS: 1e9, Burst: 1 << 30})
	if err != nil {
		return Result{}, err
	}
	store := jobstore.New(cfg.Redis, jobstore.Config{Prefix: cfg.Prefix})
	if cfg.SSEGetRate <= 0 {
		cfg.SSEGetRate = 1000
	}
	srv := api.New(api.Config{MaxStreamsPerTenant: max(cfg.SSEStreams, 1)}, store, tenants, nil, cfg.Logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx, ln) }()
	defer func() { stop(); <-done }()

	addr := ln.Addr().String()
	var errs atomic.Int64
	// call sends a pre-rendered request on w's connection (dialled on first
	// use) and returns the Location of a successful answer.
	call := func(w *worker, req []byte) (string, bool) {
		if w.c.addr == "" {
			w.c.addr, w.c.timeout = addr, 10*time.Second
		}
		status, loc, err := w.c.do(req)
		if err != nil || status >= 300 {
			errs.Add(1)
			return "", false
		}
		return loc, true
	}

	var mu sync.Mutex
	var ids []string
	submitReq := request(http.MethodPost, addr, "/v1/jobs", benchToken, cfg.Spec)
	submit := func(w *worker) {
		if loc, ok := call(w, submitReq); ok {
			mu.Lock()
			ids = append(ids, strings.TrimPrefix(loc, "/v1/jobs/"))
			mu.Unlock()
		}
	}
	var getReqs [][]byte // fixed once the submits are done
	get := func(w *worker) { call(w, getReqs[w.r.IntN(len(getReqs))]) }
	res := Result{Clients: cfg.Clients, PhaseS: cfg.Duration.Seconds(), ListLimit: listLimit,
		SubmitOpenRate: cfg.SubmitRate, GetOpenRate: cfg.GetRate, OpenWorkers: cfg.OpenWorkers}

	cpu0 := cpuTime()
	n, rate, lat := phase(ctx, cfg.Clients, cfg.Duration, submit)
	res.SubmitCPUUs = cpuPerOp(cpu0, n)
	res.Submits, res.SubmitPerS, res.SubmitP50Ms, res.SubmitP99Ms = n, rate, pct(lat, 0.50), pct(lat, 0.99)
	if cfg.SubmitRate > 0 && ctx.Err() == nil {
		n, rate, lat = openPhase(ctx, cfg.SubmitRate, cfg.OpenWorkers, cfg.Duration, submit)
		res.SubmitsOpen, res.SubmitOpenPerS, res.SubmitOpenP50Ms, res.SubmitOpenP99Ms = n, rate, pct(lat, 0.50), pct(lat, 0.99)
	}
	if len(ids) == 0 {
		return res, fmt.Errorf("no submit succeeded (%d errors)", errs.Load())
	}
	for _, id := range ids {
		getReqs = append(getReqs, request(http.MethodGet, addr, "/v1/jobs/"+id, benchToken, nil))
	}
	cpu0 = cpuTime()
	n, rate, lat = phase(ctx, cfg.Clients, cfg.Duration, get)
	res.GetCPUUs = cpuPerOp(cpu0, n)
	res.GetPerS, res.GetP50Ms, res.GetP99Ms = rate, pct(lat, 0.50), pct(lat, 0.99)
	if cfg.GetRate > 0 && ctx.Err() == nil {
		_, rate, lat = openPhase(ctx, cfg.GetRate, cfg.OpenWorkers, cfg.Duration, get)
		res.GetOpenPerS, res.GetOpenP50Ms, res.GetOpenP99Ms = rate, pct(lat, 0.50), pct(lat, 0.99)
	}
	listReq := request(http.MethodGet, addr, fmt.Sprintf("/v1/jobs?limit=%d", listLimit), benchToken, nil)
	_, rate, lat = phase(ctx, cfg.Clients, cfg.Duration, func(w *worker) { call(w, listReq) })
	res.ListPerS, res.ListP99Ms = rate, pct(lat, 0.99)
	if cfg.SSEStreams > 0 && ctx.Err() == nil {
		conns, err := openStreams(addr, ids, cfg.SSEStreams)
		if err != nil {
			return res, fmt.Errorf("open %d event streams: %w", cfg.SSEStreams, err)
		}
		time.Sleep(500 * time.Millisecond) // let the streams' first reads settle: idle is what is measured
		res.SSEStreams, res.GetSSERate = len(conns), cfg.SSEGetRate
		_, rate, lat = openPhase(ctx, cfg.SSEGetRate, cfg.OpenWorkers, cfg.Duration, get)
		res.GetSSEPerS, res.GetSSEP50Ms, res.GetSSEP99Ms = rate, pct(lat, 0.50), pct(lat, 0.99)
		var w worker
		w.c.addr, w.c.timeout = addr, 10*time.Second
		if status, _, err := w.c.do(request(http.MethodGet, addr, "/readyz", "", nil)); err == nil {
			res.ReadyzSSECode = status
		}
		w.c.close()
		closeAll(conns)
	}
	res.Errors = errs.Load()
	return res, ctx.Err()
}

// Validate names the field at fault; zero values take the defaults.
func (c Config) Validate() error {
	switch {
	case c.Redis == nil:
		return errors.New("apibench: Redis: required")
	case len(c.Spec) == 0:
		return errors.New("apibench: Spec: the job to submit is required")
	case c.Clients < 0 || c.OpenWorkers < 0 || c.SSEStreams < 0:
		return fmt.Errorf("apibench: Clients %d, OpenWorkers %d, SSEStreams %d: must not be negative", c.Clients, c.OpenWorkers, c.SSEStreams)
	case c.SubmitRate < 0 || c.GetRate < 0 || c.SSEGetRate < 0:
		return fmt.Errorf("apibench: SubmitRate %g, GetRate %g, SSEGetRate %g: must not be negative", c.SubmitRate, c.GetRate, c.SSEGetRate)
	}
	return nil
}
