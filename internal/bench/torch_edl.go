package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/internal/cli"
	"github.com/edl-nomad/edl/jobs"
)

// errExecRefused: this build's API does not run exec jobs.
var errExecRefused = errors.New("the API refused the exec job")

// runEdlRestart runs the scenario under edl dev (in this process) with the
// script as an exec job, each run in a warm interpreter or (warm false)
// cold: its workers' program output is read from the local cluster's log
// files (LogDir/<job>/<workerID>.stdout.log).
func (b *torchBench) runEdlRestart(ctx context.Context, scenario string, warm bool) (torchResult, error) {
	system := "edl-restart"
	if !warm {
		system = "edl-restart-cold"
	}
	dataDir := filepath.Join(b.dir, system+"-"+scenario)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return torchResult{}, err
	}
	d, err := b.env.StartDev(ctx, DevConfig{Listen: "127.0.0.1:0", DataDir: dataDir, Slots: 3, Grace: 10 * time.Second,
		Cooldown: time.Second, Interval: 200 * time.Millisecond, WorkerLogLevel: b.workerLogLevel}, cli.NewLogger(io.Discard, 0, false))
	if err != nil {
		return torchResult{}, err
	}
	defer d.Shutdown()
	lo, hi, workers := 2, 2, "2->3"
	switch scenario {
	case "scale_in":
		lo, hi, workers = 2, 3, "3->2"
	case "failure":
		lo, hi, workers = 3, 3, "3 (one killed)"
	}
	command := append([]string{b.python, b.script, "--steps=1000000", fmt.Sprintf("--ckpt-every=%d", b.ckptEvery)}, b.scriptArgs...)
	spec := jobs.Spec{Name: "bench-torch-" + strings.ReplaceAll(scenario, "_", "-"), Workers: jobs.WorkerRange{Min: lo, Max: hi},
		Priority: jobs.Guaranteed,
		Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Command: command, Warm: &warm,
			Env: map[string]string{"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}}},
		Checkpoint: jobs.CheckpointPolicy{Keep: 2}}
	var job jobs.Job
	if err := d.API(ctx, "POST", "/v1/jobs", spec, &job); err != nil {
		if strings.Contains(err.Error(), "status 422") {
			return torchResult{}, fmt.Errorf("%w (is exec mode in this build?): %v", errExecRefused, err)
		}
		return torchResult{}, err
	}
	defer func() {
		_ = d.API(context.Background(), "DELETE", "/v1/jobs/"+job.ID, nil, nil)
	}()
	logDir := filepath.Join(dataDir, "workers", job.ID)
	log := newStepLog()
	stopRead := make(chan struct{})
	defer close(stopRead)
	go func() {
		for {
			readWorkerLogs(logDir, log)
			select {
			case <-stopRead:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	initial := lo
	if scenario == "scale_in" {
		initial = 3
	}
	fmt.Fprintf(b.log, "bench torch: %s %s: job %s submitted, warming up\n", system, scenario, job.ID)
	var names []string
	if err := waitFor(ctx, b.timeout, "the first steps", func() bool {
		names = nil
		for name := range log.snapshot() {
			names = append(names, name)
		}
		return len(names) == initial && warmedUp(log, names, b.warmup)()
	}); err != nil {
		return torchResult{}, err
	}
	sort.Strings(names)
	event := unixNow()
	exclude := map[string]bool{}
	switch scenario {
	case "scale_out":
		if err := d.API(ctx, "PATCH", "/v1/jobs/"+job.ID, map[string]any{"spec": map[string]any{"workers": map[string]int{"min": 2, "max": 3}}}, nil); err != nil {
			return torchResult{}, err
		}
		if err := d.API(ctx, "POST", "/v1/jobs/"+job.ID+"/scale", map[string]int{"workers": 3}, nil); err != nil {
			return torchResult{}, err
		}
	case "scale_in":
		if err := d.API(ctx, "POST", "/v1/jobs/"+job.ID+"/scale", map[string]int{"workers": 2}, nil); err != nil {
			return torchResult{}, err
		}
	case "failure":
		victim, pid, err := programOf(ctx, d, job.ID)
		if err != nil {
			return torchResult{}, err
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return torchResult{}, fmt.Errorf("kill the program of worker %s: %w", victim, err)
		}
		exclude[victim] = true
	}
	fmt.Fprintf(b.log, "bench torch: %s %s: event sent, waiting for the restart\n", system, scenario)
	// Two workers (the job's minimum) keep training through every scenario.
	werr := waitFor(ctx, b.timeout, "two survivors to restart and train", func() bool {
		done := 0
		for name, seq := range log.snapshot() {
			if exclude[name] || len(seq) == 0 || seq[0].Time >= event {
				continue
			}
			if ok, n := restartedAfter(seq, event); ok && n >= b.after {
				done++
			}
		}
		return done >= 2
	})
	f := analyzeSteps(log.snapshot(), event, exclude)
	if werr != nil && f.survivors == 0 {
		return torchResult{}, werr
	}
	return torchResult{System: system, Scenario: scenario, StallS: f.stall, StepsRedone: f.redone,
		Workers: workers, Survivors: f.survivors, Restarted: f.restarted && werr == nil}, nil
}

// readWorkerLogs parses every worker's stdout log of the job (rotated
// parts first) into log, one sequence per worker ID.
func readWorkerLogs(dir string, log *stepLog) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.stdout.log"))
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".stdout.log")
		var seq []stepLine
		parts, _ := filepath.Glob(f + ".*")
		sort.Sort(sort.Reverse(sort.StringSlice(parts))) // .2 before .1
		for _, p := range append(parts, f) {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				if l, ok := parseStepLine(sc.Text()); ok {
					seq = append(seq, l)
				}
			}
		}
		if len(seq) > 0 {
			log.set(id, seq)
		}
	}
}

// programOf finds the running program of the job's worker with the
// highest rank (not rank 0, so the generation's root survives): the
// process under an edl-reaper of that worker (a warm interpreter waiting
// for the next run calls itself edl-warm, worker/warm/boot.py). The
// rank comes from the API: a warm run's /proc environ is the one its
// interpreter started with, before the generation was known.
func programOf(ctx context.Context, d *Dev, jobID string) (workerID string, pid int, err error) {
	var ws struct {
		Workers []struct {
			ID   string `json:"id"`
			Rank int    `json:"rank"`
		} `json:"workers"`
	}
	if err := d.API(ctx, "GET", "/v1/jobs/"+jobID+"/workers", nil, &ws); err != nil {
		return "", 0, err
	}
	best := 0 // rank 0 is left alone
	for _, w := range ws.Workers {
		if w.Rank > best {
			best, workerID = w.Rank, w.ID
		}
	}
	if workerID == "" {
		return "", 0, fmt.Errorf("no worker of job %s with rank > 0 (workers %+v)", jobID, ws.Workers)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00EDL_JOB_ID="+jobID+"\x00")) && !bytes.HasPrefix(env, []byte("EDL_JOB_ID="+jobID+"\x00")) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if strings.TrimSpace(string(comm)) == "edl-warm" {
			continue
		}
		// The program's parent is its reaper (edl-reaper), whose parent is
		// the worker: the first ancestor with --worker-id names it.
		if workerAbove(n) == workerID {
			return workerID, n, nil
		}
	}
	return "", 0, fmt.Errorf("no running program of worker %s (rank %d) of job %s", workerID, best, jobID)
}

// workerAbove is the --worker-id of the nearest of pid's three closest
// ancestors that has one, or "".
func workerAbove(pid int) string {
	for range 3 {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return ""
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			return ""
		}
		pid, _ = strconv.Atoi(f[1])
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			return ""
		}
		args := strings.Split(string(cmdline), "\x00")
		for i, a := range args {
			if a == "--worker-id" && i+1 < len(args) {
				return args[i+1]
			}
		}
	}
	return ""
}
