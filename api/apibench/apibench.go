// Package apibench measures the jobs API end to end: it serves the real API
// over a real Redis on a loopback port and drives it with concurrent HTTP
// clients (submit, get, list), reporting throughput and latency percentiles.
//
// It owns no data semantics; the caller provides the Redis (edl bench api
// starts its own redis-server) and prints the Result.
package apibench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/jobs"
	"github.com/redis/go-redis/v9"
)

// Config says what to measure.
type Config struct {
	Redis    redis.UniversalClient
	Prefix   string        // key prefix (default "edl-bench:")
	Clients  int           // concurrent HTTP clients (default 64)
	Duration time.Duration // per phase (default 3s)
	Spec     []byte        // the job submitted (JSON)
	Logger   *slog.Logger
}

// Result is what `edl bench api --json` prints.
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
	Errors      int64   `json:"errors"`
}

const (
	benchToken = "edl-bench-token"
	listLimit  = 50
)

// Run serves the API on a loopback port and measures three phases in turn.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Clients <= 0 {
		cfg.Clients = 64
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 3 * time.Second
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "edl-bench:"
	}
	if _, err := jobs.DecodeSpec(cfg.Spec); err != nil {
		return Result{}, fmt.Errorf("bench spec: %w", err)
	}
	tenants, err := jobs.NewTenants(jobs.Tenant{Name: "bench", TokenSHA256: jobs.HashToken(benchToken), RatePerS: 1e9, Burst: 1 << 30})
	if err != nil {
		return Result{}, err
	}
	store := jobs.NewStore(cfg.Redis, jobs.StoreConfig{Prefix: cfg.Prefix})
	srv := api.New(api.Config{}, store, tenants, nil, cfg.Logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx, ln) }()
	defer func() { stop(); <-done }()

	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: cfg.Clients * 2, MaxIdleConnsPerHost: cfg.Clients * 2, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	var errs atomic.Int64
	call := func(method, url string, body []byte) (string, bool) {
		req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+benchToken)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			errs.Add(1)
			return "", false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode >= 300 {
			errs.Add(1)
			return "", false
		}
		if method == http.MethodPost {
			return strings.TrimPrefix(resp.Header.Get("Location"), "/v1/jobs/"), true
		}
		return "", true
	}

	var mu sync.Mutex
	var ids []string
	res := Result{Clients: cfg.Clients, PhaseS: cfg.Duration.Seconds(), ListLimit: listLimit}
	n, rate, lat := phase(ctx, cfg.Clients, cfg.Duration, func(int, *rand.Rand) {
		if id, ok := call(http.MethodPost, base+"/v1/jobs", cfg.Spec); ok {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}
	})
	res.Submits, res.SubmitPerS, res.SubmitP50Ms, res.SubmitP99Ms = n, rate, pct(lat, 0.50), pct(lat, 0.99)
	if len(ids) == 0 {
		return res, fmt.Errorf("no submit succeeded (%d errors)", errs.Load())
	}
	_, rate, lat = phase(ctx, cfg.Clients, cfg.Duration, func(_ int, r *rand.Rand) {
		call(http.MethodGet, base+"/v1/jobs/"+ids[r.IntN(len(ids))], nil)
	})
	res.GetPerS, res.GetP50Ms, res.GetP99Ms = rate, pct(lat, 0.50), pct(lat, 0.99)
	_, rate, lat = phase(ctx, cfg.Clients, cfg.Duration, func(int, *rand.Rand) {
		call(http.MethodGet, fmt.Sprintf("%s/v1/jobs?limit=%d", base, listLimit), nil)
	})
	res.ListPerS, res.ListP99Ms = rate, pct(lat, 0.99)
	res.Errors = errs.Load()
	return res, ctx.Err()
}

// phase runs op from clients goroutines for d and returns the number of
// operations, their rate and their latencies (sorted).
func phase(ctx context.Context, clients int, d time.Duration, op func(int, *rand.Rand)) (int, float64, []time.Duration) {
	lats := make([][]time.Duration, clients)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 1))
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(deadline) {
					return
				}
				op(c, r)
				lats[c] = append(lats[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return len(all), float64(len(all)) / elapsed.Seconds(), all
}

// pct is the q-quantile of sorted latencies, in milliseconds.
func pct(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}
