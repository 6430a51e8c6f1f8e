//go:build rigs

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/local/redisproc"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/nomadx/nomadtest"
	"github.com/edl-nomad/edl/planner/loop"
	"github.com/hashicorp/nomad/api"
	"github.com/redis/go-redis/v9"
)

// nomadRoundsResult is one requests-per-round JSON line.
type nomadRoundsResult struct {
	Mode                     string             `json:"mode"` // "nomad-requests"
	RunningJobs              int                `json:"running_jobs"`
	Rounds                   int                `json:"rounds"`
	RequestsPerRound         float64            `json:"requests_per_round"`
	StartRounds              int                `json:"start_rounds"`
	StartRequestsPerRound    float64            `json:"start_requests_per_round"`
	StartWritesPerJob        float64            `json:"start_writes_per_job"`
	RoundMs                  float64            `json:"round_ms"`
	AsynchronousPlacementOn  bool               `json:"asynchronous_placement"`
	RequestsPerRoundByMethod map[string]float64 `json:"requests_per_round_by_path"`
}

// nomadFlapResult is the flap-count JSON line.
type nomadFlapResult struct {
	Mode              string  `json:"mode"` // "nomad-flaps"
	JobStarts         int     `json:"job_starts"`
	Flaps             int     `json:"flaps"`
	FlapsPer100Starts float64 `json:"flaps_per_100_starts"`
	ScaleRequests     int     `json:"scale_requests"`
	Registers         int     `json:"registers"`
	Rounds            int     `json:"rounds"`
	Seconds           float64 `json:"seconds"`
}

// nomadBenchEnv is the planner loop on a child Redis against nomadtest.
type nomadBenchEnv struct {
	srv   *nomadtest.Server
	store *jobstore.Store
	loop  *loop.Loop
	rdb   *redis.Client
}

func newNomadBenchEnv(ctx context.Context, rp *redisproc.Proc, prefix string, nodes []nomadtest.NodeSpec, placement, exitDelay time.Duration) (*nomadBenchEnv, error) {
	srv := nomadtest.NewServer(nomadtest.Config{Nodes: nodes, PlacementDelay: placement, PlacementJitter: placement, ExitDelay: exitDelay})
	return newNomadBenchEnvOn(ctx, rp, prefix, srv)
}

// newNomadBenchEnvOn wires the loop to a running nomadtest server; close
// stops the server.
func newNomadBenchEnvOn(ctx context.Context, rp *redisproc.Proc, prefix string, srv *nomadtest.Server) (*nomadBenchEnv, error) {
	cfg := nomadx.DefaultConfig()
	cfg.Address = srv.URL()
	cfg.RedisURL, cfg.StoreURL = rp.URL(), "file:///tmp/edl-bench-store"
	cfg.Retry.BaseDelay, cfg.Retry.MaxDelay, cfg.Retry.Timeout = 5*time.Millisecond, 50*time.Millisecond, 5*time.Second
	cluster, err := nomadx.New(cfg, nil)
	if err != nil {
		srv.Close()
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr()})
	store := jobstore.New(rdb, jobstore.Config{Prefix: prefix})
	lc := loop.DefaultConfig()
	lc.Holder, lc.Prefix = "bench-e2e-nomad", prefix
	lc.Policy.Cooldown = 0
	pl, err := loop.New(lc, store, cluster, rdb, slog.New(slog.DiscardHandler))
	if err != nil {
		srv.Close()
		rdb.Close()
		return nil, err
	}
	return &nomadBenchEnv{srv: srv, store: store, loop: pl, rdb: rdb}, nil
}

func (e *nomadBenchEnv) close() {
	e.srv.Close()
	e.rdb.Close()
}

// benchSpec is a job of one-GPU workers between lo and hi.
func benchSpec(i, lo, hi int) jobs.Spec {
	return jobs.Spec{
		Name: fmt.Sprintf("nomad-bench-%d", i), Workers: jobs.WorkerRange{Min: lo, Max: hi}, GPUsPerWorker: 1, Priority: jobs.Guaranteed,
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
			Model:   jobs.MLPModel{Hidden: []int{16}},
			Dataset: jobs.SyntheticDataset{Seed: int64(i + 1), Samples: 1000, Features: 8, Classes: 2, Partitions: 8},
			Epochs:  1, BatchSize: 8, LearningRate: 0.05,
		}},
	}
}

// runningAllocs counts allocations that run, per Nomad job.
func runningAllocs(srv *nomadtest.Server, ids []string) map[string]int {
	out := map[string]int{}
	for _, id := range ids {
		for _, a := range srv.Allocations("default", "edl-"+id) {
			if a.DesiredStatus == "run" && a.ClientStatus == "running" {
				out[id]++
			}
		}
	}
	return out
}

// runBenchE2ENomad runs the planner loop (its Round, as `edl serve`
// does every interval) on a child Redis against nomadtest with
// asynchronous placement, and prints JSON lines: Nomad requests per round
// at each running-job count, then flaps per 100 job starts.
func runBenchE2ENomad(ctx context.Context, o nomadBenchOpts, stdout io.Writer) error {
	dir, err := os.MkdirTemp("", "edl-bench-e2e-nomad-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rp, err := redisproc.Start(ctx, filepath.Join(dir, "redis"), redisproc.Options{})
	if err != nil {
		return fmt.Errorf("bench e2e --nomad: redis: %w", err)
	}
	defer rp.Stop()
	enc := json.NewEncoder(stdout)
	for k, n := range o.jobCounts {
		res, err := nomadRequestsPerRound(ctx, rp, fmt.Sprintf("bench%d:", k), n, o)
		if err != nil {
			return fmt.Errorf("bench e2e --nomad: %d jobs: %w", n, err)
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	fl, err := nomadFlaps(ctx, rp, "benchflap:", o)
	if err != nil {
		return fmt.Errorf("bench e2e --nomad: flaps: %w", err)
	}
	if err := enc.Encode(fl); err != nil {
		return err
	}
	if o.trials == 0 {
		return nil
	}
	cf, err := nomadContention(ctx, rp, o)
	if err != nil {
		return fmt.Errorf("bench e2e --nomad: contention: %w", err)
	}
	return enc.Encode(cf)
}

// nomadRequestsPerRound starts n single-worker jobs, then measures the
// requests of o.rounds rounds once they all run.
func nomadRequestsPerRound(ctx context.Context, rp *redisproc.Proc, prefix string, n int, o nomadBenchOpts) (nomadRoundsResult, error) {
	gpus := max(4, (n+3)/4*4)
	var nodes []nomadtest.NodeSpec
	for i := range 4 {
		nodes = append(nodes, nomadtest.NodeSpec{Name: fmt.Sprintf("node-%d", i+1), GPUs: gpus / 4, UniqueGPUIDs: true,
			CPUShares: 1 << 20, MemoryMB: 1 << 24})
	}
	e, err := newNomadBenchEnv(ctx, rp, prefix, nodes, 20*time.Millisecond, 50*time.Millisecond)
	if err != nil {
		return nomadRoundsResult{}, err
	}
	defer e.close()
	var ids []string
	for i := range n {
		j, _, err := e.store.Create(ctx, "default", benchSpec(i, 1, 1), "")
		if err != nil {
			return nomadRoundsResult{}, err
		}
		ids = append(ids, j.ID)
	}
	res := nomadRoundsResult{Mode: "nomad-requests", RunningJobs: n, Rounds: o.rounds, AsynchronousPlacementOn: true,
		RequestsPerRoundByMethod: map[string]float64{}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := e.loop.Round(ctx); err != nil {
			return res, fmt.Errorf("round: %w", err)
		}
		res.StartRounds++
		run := runningAllocs(e.srv, ids)
		if len(run) == n {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d jobs running after 60s", len(run), n)
		}
		time.Sleep(o.interval)
	}
	start := e.srv.Requests()
	res.StartRequestsPerRound = float64(len(start)) / float64(res.StartRounds)
	writes := 0
	for _, r := range start {
		if r.Method != "GET" {
			writes++
		}
	}
	res.StartWritesPerJob = float64(writes) / float64(n)
	// Let the last placements settle into the view, then measure.
	e.srv.Settle(5 * time.Second)
	if err := e.loop.Round(ctx); err != nil {
		return res, err
	}
	e.srv.ResetRequests()
	var spent time.Duration
	for range o.rounds {
		t := time.Now()
		if err := e.loop.Round(ctx); err != nil {
			return res, fmt.Errorf("round: %w", err)
		}
		spent += time.Since(t)
		time.Sleep(o.interval)
	}
	reqs := e.srv.Requests()
	res.RequestsPerRound = float64(len(reqs)) / float64(o.rounds)
	byPath := map[string]int{}
	for _, r := range reqs {
		byPath[r.Method+" "+pathShape(r.Path)]++
	}
	for k, c := range byPath {
		res.RequestsPerRoundByMethod[k] = float64(c) / float64(o.rounds)
	}
	res.RoundMs = ms(spent) / float64(o.rounds)
	return res, nil
}

// pathShape replaces IDs in a Nomad API path: /v1/job/edl-x/scale ->
// /v1/job/:id/scale.
func pathShape(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) > 3 && (parts[2] == "job" || parts[2] == "allocation" || parts[2] == "node") {
		parts[3] = ":id"
	}
	return strings.Join(parts, "/")
}

// nomadFlaps starts o.starts jobs (min 1, max 4 one-GPU workers) in waves
// of 10 on about o.starts GPUs, so that early jobs grow and are shrunk
// again as later ones arrive (stopping allocations whose GPUs Nomad hands on, placements
// that lag the answers), and counts flaps: a started job scaled to 0 and
// up again while it is active.
func nomadFlaps(ctx context.Context, rp *redisproc.Proc, prefix string, o nomadBenchOpts) (nomadFlapResult, error) {
	var nodes []nomadtest.NodeSpec
	for i := range 4 {
		nodes = append(nodes, nomadtest.NodeSpec{Name: fmt.Sprintf("node-%d", i+1), GPUs: (o.starts + 3) / 4, UniqueGPUIDs: true,
			CPUShares: 1 << 20, MemoryMB: 1 << 24})
	}
	// A loaded scheduler: placements lag the answers by 100-200 ms, in no
	// particular order, and a stopped worker takes 200 ms to finish its
	// step.
	e, err := newNomadBenchEnv(ctx, rp, prefix, nodes, 100*time.Millisecond, 200*time.Millisecond)
	if err != nil {
		return nomadFlapResult{}, err
	}
	defer e.close()
	res := nomadFlapResult{Mode: "nomad-flaps", JobStarts: o.starts}
	t0 := time.Now()
	var ids []string
	deadline := time.Now().Add(120 * time.Second)
	for len(ids) < o.starts || len(runningAllocs(e.srv, ids)) < o.starts {
		if len(ids) < o.starts && res.Rounds%5 == 0 {
			for range min(10, o.starts-len(ids)) {
				j, _, err := e.store.Create(ctx, "default", benchSpec(len(ids), 1, 4), "")
				if err != nil {
					return res, err
				}
				ids = append(ids, j.ID)
			}
		}
		if err := e.loop.Round(ctx); err != nil {
			return res, fmt.Errorf("round: %w", err)
		}
		res.Rounds++
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d jobs running after 120s", len(runningAllocs(e.srv, ids)), o.starts)
		}
		time.Sleep(o.interval)
	}
	// A few more rounds: a flap shows after the start too.
	for range 20 {
		if err := e.loop.Round(ctx); err != nil {
			return res, err
		}
		res.Rounds++
		time.Sleep(o.interval)
	}
	res.Seconds = time.Since(t0).Seconds()
	res.Flaps, res.Registers, res.ScaleRequests = countFlaps(e.srv.Requests())
	res.FlapsPer100Starts = float64(res.Flaps) * 100 / float64(o.starts)
	return res, nil
}

// countFlaps reads the register and scale requests: a flap is a job
// scaled to 0 after it had workers, and up again.
func countFlaps(reqs []nomadtest.Request) (flaps, registers, scales int) {
	seq := map[string][]int{}
	for _, r := range reqs {
		switch {
		case r.Method == "PUT" && r.Path == "/v1/jobs":
			var req api.JobRegisterRequest
			if json.Unmarshal(r.Body, &req) == nil && req.Job != nil && req.Job.ID != nil {
				seq[*req.Job.ID] = append(seq[*req.Job.ID], *req.Job.TaskGroups[0].Count)
				registers++
			}
		case r.Method == "PUT" && strings.HasSuffix(r.Path, "/scale"):
			var req api.ScalingRequest
			if json.Unmarshal(r.Body, &req) == nil && req.Count != nil {
				id := strings.TrimSuffix(strings.TrimPrefix(r.Path, "/v1/job/"), "/scale")
				seq[id] = append(seq[id], int(*req.Count))
				scales++
			}
		}
	}
	for _, s := range seq {
		started := false
		for k, c := range s {
			if c > 0 {
				started = true
			}
			if started && c == 0 && k+1 < len(s) {
				flaps++
				break
			}
		}
	}
	return flaps, registers, scales
}

// nomadContention repeats the start seen flapping on a real agent: job a
// holds all 4 GPUs of a node, job b (2 workers) arrives, the planner
// shrinks a to make room; a's stopping workers take 200 ms to exit and the
// two evaluations are placed 20-60 ms after their writes in either order.
// Rounds run every interval for 600 ms; each trial is one start of b.
func nomadContention(ctx context.Context, rp *redisproc.Proc, o nomadBenchOpts) (nomadFlapResult, error) {
	res := nomadFlapResult{Mode: "nomad-flaps-contention", JobStarts: o.trials}
	t0 := time.Now()
	for trial := range o.trials {
		srv := nomadtest.NewServer(nomadtest.Config{Nodes: []nomadtest.NodeSpec{{Name: "node-1", GPUs: 4, CPUShares: 1 << 20, MemoryMB: 1 << 24}},
			PlacementDelay: 20 * time.Millisecond, PlacementJitter: 40 * time.Millisecond, ExitDelay: 200 * time.Millisecond})
		e, err := newNomadBenchEnvOn(ctx, rp, fmt.Sprintf("benchcont%d:", trial), srv)
		if err != nil {
			return res, err
		}
		if _, _, err := e.store.Create(ctx, "default", benchSpec(0, 1, 4), ""); err != nil {
			e.close()
			return res, err
		}
		if err := e.loop.Round(ctx); err != nil {
			e.close()
			return res, err
		}
		srv.Settle(5 * time.Second)
		if _, _, err := e.store.Create(ctx, "default", benchSpec(1, 2, 2), ""); err != nil {
			e.close()
			return res, err
		}
		for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); time.Sleep(o.interval) {
			if err := e.loop.Round(ctx); err != nil {
				e.close()
				return res, err
			}
			res.Rounds++
		}
		f, r, sc := countFlaps(srv.Requests())
		res.Flaps += f
		res.Registers += r
		res.ScaleRequests += sc
		e.close()
	}
	res.Seconds = time.Since(t0).Seconds()
	res.FlapsPer100Starts = float64(res.Flaps) * 100 / float64(o.trials)
	return res, nil
}
