package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/jobs"
)

// e2eResult is the one JSON line `edl bench e2e --json` prints.
type e2eResult struct {
	SubmitToFirstStepMs    float64   `json:"submit_to_first_step_ms"`
	ScaleDecisionToJoinMs  float64   `json:"scale_decision_to_join_ms"`
	CancelToGoneMs         float64   `json:"cancel_to_gone_ms"`
	Runs                   int       `json:"runs"`
	SubmitToFirstStepAllMs []float64 `json:"submit_to_first_step_all_ms"`
	ScaleDecisionAllMs     []float64 `json:"scale_decision_to_join_all_ms"`
	CancelToGoneAllMs      []float64 `json:"cancel_to_gone_all_ms"`
}

func runBenchE2E(ctx context.Context, env Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench e2e", "Starts edl dev in this process (child Redis, API, planner, local workers) and measures,\nover --runs jobs, the time from POST /v1/jobs to the first applied step, from the\nplanner's +1 decision to the new worker training, and from DELETE to no worker left.\nPrints the medians as one JSON line.", stderr)
	runs := fs.Int("runs", 3, "jobs to measure")
	slots := fs.Int("slots", 3, "CPU worker slots")
	_ = fs.Bool("json", true, "print one JSON line (the only output format)")
	onNomad := fs.Bool("nomad", false, "instead: the planner loop against nomadtest (asynchronous placement): Nomad requests per round at --nomad-jobs running jobs, and flaps per --nomad-starts job starts")
	nomadJobs := fs.String("nomad-jobs", "1,10,100", "with --nomad: running-job counts to measure")
	nomadRounds := fs.Int("nomad-rounds", 20, "with --nomad: measured rounds per count")
	nomadStarts := fs.Int("nomad-starts", 100, "with --nomad: job starts for the flap count")
	nomadTrials := fs.Int("nomad-trials", 25, "with --nomad: contended starts (a job shrinks for a new one) for the second flap count; 0 skips it")
	nomadInterval := fs.Duration("nomad-interval", 20*time.Millisecond, "with --nomad: time between planner rounds")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *onNomad {
		o, err := parseNomadBench(*nomadJobs, *nomadRounds, *nomadStarts, *nomadTrials, *nomadInterval)
		if err != nil {
			return err
		}
		return runBenchE2ENomad(ctx, o, stdout)
	}
	if *runs < 1 || *slots < 2 {
		return cli.Usagef("bench e2e: need --runs >= 1 and --slots >= 2")
	}
	dir, err := os.MkdirTemp("", "edl-bench-e2e-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := env.StartDev(ctx, DevConfig{Listen: "127.0.0.1:0", DataDir: dir, Slots: *slots, Grace: 10 * time.Second,
		Cooldown: time.Second, Interval: 200 * time.Millisecond, WorkerLogLevel: "warn"}, cli.NewLogger(io.Discard, 0, false))
	if err != nil {
		return err
	}
	defer d.Shutdown()
	res := e2eResult{Runs: *runs}
	for i := 0; i < *runs; i++ {
		sub, join, gone, err := e2eOnce(ctx, d, i)
		if err != nil {
			return fmt.Errorf("bench e2e run %d: %w", i, err)
		}
		res.SubmitToFirstStepAllMs = append(res.SubmitToFirstStepAllMs, sub)
		res.ScaleDecisionAllMs = append(res.ScaleDecisionAllMs, join)
		res.CancelToGoneAllMs = append(res.CancelToGoneAllMs, gone)
	}
	res.SubmitToFirstStepMs = median(res.SubmitToFirstStepAllMs)
	res.ScaleDecisionToJoinMs = median(res.ScaleDecisionAllMs)
	res.CancelToGoneMs = median(res.CancelToGoneAllMs)
	return json.NewEncoder(stdout).Encode(res)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// e2eOnce submits one long job of 1 worker, measures its first step, raises
// its max to 2 and measures the join from the planner's decision, then
// cancels it and measures until its last worker is gone.
func e2eOnce(ctx context.Context, d *Dev, i int) (submit, join, gone float64, err error) {
	spec := jobs.Spec{
		Name: fmt.Sprintf("bench-e2e-%d", i), Workers: jobs.WorkerRange{Min: 1, Max: 1}, Priority: jobs.Guaranteed,
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
			Model:   jobs.MLPModel{Hidden: []int{256, 256}},
			Dataset: jobs.SyntheticDataset{Seed: int64(i + 1), Samples: 500000, Features: 64, Classes: 10, Partitions: 256},
			Epochs:  100, BatchSize: 64, LearningRate: 0.05, Momentum: 0.9,
		}},
		Checkpoint: jobs.CheckpointPolicy{EverySteps: 1000, Keep: 2},
	}
	t0 := time.Now()
	var created jobs.Job
	if err := d.API(ctx, "POST", "/v1/jobs", spec, &created); err != nil {
		return 0, 0, 0, err
	}
	id := created.ID
	// The leader moves the job to running when it applies the first step;
	// that state event's time is the first step (progress lags 250 ms).
	running, err := waitEvent(ctx, d, id, func(e jobs.Event) bool {
		return e.Type == jobs.EventState && e.Data["to"] == string(jobs.Running)
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("first step: %w", err)
	}
	submit = ms(running.Sub(t0))
	// Raise the job's max to 2: the planner (woken by the change) hands it
	// a spare slot, +1 worker, which must start, prepare and join.
	if err := d.API(ctx, "PATCH", "/v1/jobs/"+id, map[string]any{"spec": map[string]any{"workers": map[string]int{"max": 2}}}, nil); err != nil {
		return 0, 0, 0, err
	}
	// The new worker's "joined generation" event is stamped when it is
	// admitted, at a step boundary, and its first step follows at once;
	// progress (reported every 250 ms) would only add reporting delay.
	var decided, joinedAt time.Time
	deadline := time.Now().Add(60 * time.Second)
	for joinedAt.IsZero() {
		evs, err := d.Store.Events(ctx, id, "", 1000)
		if err != nil {
			return 0, 0, 0, err
		}
		for _, e := range evs {
			switch {
			case e.Type == jobs.EventScale && e.Data["to"] == float64(2):
				decided = e.Time
			case e.Type == jobs.EventWorker && e.Data["world"] == float64(2) && !decided.IsZero() && joinedAt.IsZero():
				joinedAt = e.Time
			}
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("join: no scale to 2 and join events after 60s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	join = ms(joinedAt.Sub(decided))
	t1 := time.Now()
	if err := d.API(ctx, "DELETE", "/v1/jobs/"+id, nil, nil); err != nil {
		return 0, 0, 0, err
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		j, err := d.Store.Get(ctx, id)
		if err != nil {
			return 0, 0, 0, err
		}
		ws, err := d.Cluster.Workers(ctx, id)
		if err != nil {
			return 0, 0, 0, err
		}
		live := 0
		for _, w := range ws {
			if w.State.Live() {
				live++
			}
		}
		if j.State == jobs.Cancelled && live == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("cancel: job %s still %s with %d live workers", id, j.State, live)
		}
		time.Sleep(2 * time.Millisecond)
	}
	gone = ms(time.Since(t1))
	return submit, join, gone, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// waitEvent polls the job's events every 2 ms until one matches, and
// returns its time.
func waitEvent(ctx context.Context, d *Dev, id string, match func(jobs.Event) bool) (time.Time, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs, err := d.Store.Events(ctx, id, "", 1000)
		if err != nil {
			return time.Time{}, err
		}
		for _, e := range evs {
			if match(e) {
				return e.Time, nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("job %s: no such event after 60s", id)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// API calls the running API as the dev tenant "default".
func (d *Dev) API(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.APIURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+d.Tokens.Default)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
