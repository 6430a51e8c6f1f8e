package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
)

// chaosRow is one scenario's line of `edl bench chaos --json`.
type chaosRow struct {
	Scenario     string `json:"scenario"`
	Faults       int    `json:"faults"` // faults injected
	Acknowledged int    `json:"jobs_acknowledged"`
	Succeeded    int    `json:"jobs_succeeded"`
	Cancelled    int    `json:"jobs_cancelled"`
	Failed       int    `json:"jobs_failed"`
	// Unfinished: acknowledged jobs neither succeeded, failed nor cancelled
	// when the scenario's wait ended (then cancelled, to clear the way).
	Unfinished int `json:"jobs_unfinished"`
	// Samples of the succeeded jobs, from the workers' per-step records
	// (--debug-samples): each sample of each epoch must be in exactly one
	// applied step.
	SamplesChecked int   `json:"jobs_samples_checked"`
	Missed         int64 `json:"samples_missed"`
	Repeated       int64 `json:"samples_repeated"`
	// HTTP5xx counts every 5xx answer except 503s while Redis was down,
	// which HTTP503RedisDown counts; HTTPErrors counts requests that got no
	// answer at all.
	HTTP5xx          int64   `json:"http_5xx"`
	HTTP503RedisDown int64   `json:"http_503_redis_down"`
	HTTPErrors       int64   `json:"http_errors"`
	Requests         int64   `json:"requests"`
	Seconds          float64 `json:"seconds"`
	Note             string  `json:"note,omitempty"`
}

// chaosSummary is the last line: whether the aims held.
type chaosSummary struct {
	Summary          bool    `json:"summary"`
	AllFinished      bool    `json:"every_acknowledged_job_finished"`
	ExactlyOnce      bool    `json:"no_sample_missed_or_repeated"`
	No5xx            bool    `json:"no_5xx_but_503_while_redis_down"`
	Seconds          float64 `json:"seconds"`
	ScenariosRun     int     `json:"scenarios"`
	SamplesJobsCheck int     `json:"jobs_samples_checked"`
}

var chaosScenarios = []string{"worker-kills", "sigstop-worker", "redis-restart", "planner-restart", "submit-burst"}

func runBenchChaos(ctx context.Context, env Env, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench chaos", `Starts edl dev in this process (child Redis, API, planner, local edl worker
processes that record which samples each step used) and runs, one after the other:
  worker-kills     SIGKILL a random worker of the running jobs, 4 times
  sigstop-worker   SIGSTOP one of a job's two workers for 5 s, then SIGCONT
  redis-restart    SIGKILL the child redis-server (edl dev restarts it on its AOF)
  planner-restart  kill the planner loop 3 times at random points, a fresh one each time
  submit-burst     --burst submits at once (64 clients), then cancel what has not run
A prober reads jobs and /readyz all along. Per scenario it prints jobs acknowledged
(201), succeeded, cancelled, failed and unfinished, samples missed and repeated in
the succeeded jobs, and 5xx answers (503s while Redis is down apart).`, stderr)
	slots := fs.Int("slots", 3, "CPU worker slots")
	burst := fs.Int("burst", 2000, "submits in the submit-burst scenario")
	only := fs.String("scenarios", strings.Join(chaosScenarios, ","), "scenarios to run, comma-separated")
	wait := fs.Duration("wait", 120*time.Second, "longest wait for a scenario's jobs to finish")
	asJSON := fs.Bool("json", false, "print one JSON line per scenario and a summary line")
	devLog := fs.String("dev-log", "", "write edl dev's own log (API, planner, local cluster; info level) to this file; the workers' logs are under its data dir, removed at the end unless --keep")
	keep := fs.Bool("keep", false, "keep the data dir (Redis AOF, worker logs) and print where it is")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *slots < 2 || *burst < 1 || *wait <= 0 {
		return cli.Usagef("bench chaos: need --slots >= 2, --burst >= 1, --wait > 0")
	}
	run, bad, ok := nameList(*only, chaosScenarios)
	if !ok {
		return cli.Usagef("bench chaos: --scenarios: unknown %q (known: %s)", bad, strings.Join(chaosScenarios, ", "))
	}
	dir, err := os.MkdirTemp("", "edl-bench-chaos-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintf(stderr, "bench chaos: data dir %s (kept)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	logw := io.Discard
	if *devLog != "" {
		f, err := os.Create(*devLog)
		if err != nil {
			return cli.Usagef("bench chaos: --dev-log: %v", err)
		}
		defer f.Close()
		logw = f
	}
	token := jobs.NewToken()
	tf := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tf, []byte(fmt.Sprintf("tenants:\n  - name: chaos\n    token_sha256: %s\n    rate_per_s: 100000\n    burst: 100000\n", jobs.HashToken(token))), 0o600); err != nil {
		return err
	}
	d, err := env.StartDev(ctx, DevConfig{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "dev"), Tenants: tf, Slots: *slots,
		Grace: 5 * time.Second, Cooldown: time.Second, Interval: 200 * time.Millisecond, WorkerLogLevel: "warn",
		WorkerEnv: []string{"EDL_DEBUG_SAMPLES=true"}}, cli.NewLogger(logw, 0, false))
	if err != nil {
		return err
	}
	defer d.Shutdown()
	ch := &chaos{d: d, c: newChaosClient(d.APIURL, token), wait: *wait, burst: *burst}
	start := time.Now()
	sum := chaosSummary{Summary: true, AllFinished: true, ExactlyOnce: true, No5xx: true}
	if !*asJSON {
		fmt.Fprintf(stdout, "%-16s %6s %5s %5s %5s %5s %5s %7s %7s %6s %6s %8s %6s\n", "scenario", "faults", "ack", "ok", "cancl", "fail", "unfin", "missed", "repeat", "5xx", "503rd", "requests", "secs")
	}
	for _, name := range run {
		row, err := ch.scenario(ctx, name)
		if err != nil {
			return fmt.Errorf("bench chaos %s: %w", name, err)
		}
		sum.ScenariosRun++
		sum.SamplesJobsCheck += row.SamplesChecked
		sum.AllFinished = sum.AllFinished && row.Unfinished == 0 && row.Failed == 0
		sum.ExactlyOnce = sum.ExactlyOnce && row.Missed == 0 && row.Repeated == 0
		sum.No5xx = sum.No5xx && row.HTTP5xx == 0 && row.HTTPErrors == 0
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(row); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(stdout, "%-16s %6d %5d %5d %5d %5d %5d %7d %7d %6d %6d %8d %6.1f  %s\n", row.Scenario, row.Faults, row.Acknowledged, row.Succeeded,
			row.Cancelled, row.Failed, row.Unfinished, row.Missed, row.Repeated, row.HTTP5xx, row.HTTP503RedisDown, row.Requests, row.Seconds, row.Note)
	}
	sum.Seconds = time.Since(start).Seconds()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(sum)
	}
	fmt.Fprintf(stdout, "every acknowledged job finished: %v; no sample missed or repeated: %v; no 5xx but 503 while Redis was down: %v (%.0f s)\n",
		sum.AllFinished, sum.ExactlyOnce, sum.No5xx, sum.Seconds)
	return nil
}

// chaos drives one edl dev through the scenarios.
type chaos struct {
	d     *Dev
	c     *chaosClient
	wait  time.Duration
	burst int
	specs sync.Map // job id -> jobs.Spec, for the sample check
}

func (ch *chaos) scenario(ctx context.Context, name string) (chaosRow, error) {
	row := chaosRow{Scenario: name}
	before := ch.c.counts()
	t0 := time.Now()
	pctx, stopProbe := context.WithCancel(ctx)
	var ids idList
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); ch.probe(pctx, &ids) }()

	var err error
	switch name {
	case "worker-kills":
		err = ch.workerKills(ctx, &row, &ids)
	case "sigstop-worker":
		err = ch.sigstop(ctx, &row, &ids)
	case "redis-restart":
		err = ch.redisRestart(ctx, &row, &ids)
	case "planner-restart":
		err = ch.plannerRestart(ctx, &row, &ids)
	case "submit-burst":
		err = ch.submitBurst(ctx, &row, &ids)
	}
	if err != nil {
		stopProbe()
		<-probeDone
		return row, err
	}
	if err := ch.settle(ctx, name, &row, ids.all()); err != nil {
		stopProbe()
		<-probeDone
		return row, err
	}
	stopProbe()
	<-probeDone
	after := ch.c.counts()
	row.HTTP5xx, row.HTTP503RedisDown = after.n5xx-before.n5xx, after.n503down-before.n503down
	row.HTTPErrors, row.Requests = after.errors-before.errors, after.requests-before.requests
	row.Seconds = time.Since(t0).Seconds()
	return row, nil
}

// idList is the acknowledged jobs of a scenario, shared with the prober.
type idList struct {
	mu  sync.Mutex
	ids []string
}

func (l *idList) add(id string) {
	l.mu.Lock()
	l.ids = append(l.ids, id)
	l.mu.Unlock()
}

func (l *idList) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

func (l *idList) random() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ids) == 0 {
		return ""
	}
	return l.ids[rand.IntN(len(l.ids))]
}

// chaosJob is a small built-in trainer job; samples x epochs sets its
// length. Jobs of the fault scenarios train for some 10-20 s on 2 cores
// without faults (two hidden layers of 256), the burst's are tiny.
func chaosJob(scenario string, i, min, max, samples, epochs int) jobs.Spec {
	hidden := 256
	if scenario == "submit-burst" {
		hidden = 8
	}
	return jobs.Spec{
		Name:    fmt.Sprintf("%s-%d", scenario, i),
		Workers: jobs.WorkerRange{Min: min, Max: max},
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
			Model:   jobs.MLPModel{Hidden: []int{hidden, hidden}},
			Dataset: jobs.SyntheticDataset{Seed: int64(i + 1), Samples: samples, Features: 32, Classes: 4, Partitions: 16},
			Epochs:  epochs, BatchSize: 32, LearningRate: 0.05, Momentum: 0.9,
		}},
		Checkpoint: jobs.CheckpointPolicy{EverySteps: 50, Keep: 2},
		Labels:     map[string]string{"chaos": scenario},
	}
}

// submit posts spec; a 201 is an acknowledged job.
func (ch *chaos) submit(ctx context.Context, row *chaosRow, ids *idList, spec jobs.Spec) {
	var j jobs.Job
	if code, _ := ch.c.do(ctx, http.MethodPost, "/v1/jobs", spec, &j); code == http.StatusCreated {
		ch.specs.Store(j.ID, spec)
		ids.add(j.ID)
		row.Acknowledged++
	}
}

// probe reads a random job, a list page and /readyz every 100 ms: the
// answers a user would get during the fault.
func (ch *chaos) probe(ctx context.Context, ids *idList) {
	_ = periodic.Every(ctx, 100*time.Millisecond, func() bool {
		if id := ids.random(); id != "" {
			ch.c.do(ctx, http.MethodGet, "/v1/jobs/"+id, nil, nil)
		}
		ch.c.do(ctx, http.MethodGet, "/v1/jobs?limit=20", nil, nil)
		ch.c.do(ctx, http.MethodGet, "/readyz", nil, nil)
		return true
	})
}
