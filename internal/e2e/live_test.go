package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
	"github.com/redis/go-redis/v9"
)

// Live mode: examples/torch/train_live.py (the edl Python package) under
// edl dev, resized and killed while it runs, never restarted.

const (
	liveSamples = 10000
	liveParts   = 16
	liveEpochs  = 2
	// liveLossMargin bounds how much worse than the static run an
	// elastic one may end (a sanity bound: the batches' make-up alone has
	// moved it by -5 to +7.8 %); liveReplayMargin how far from its own
	// steps replayed in one process. The model is float64 (--dtype): in
	// float32 the replay's other summation order (one batch where the
	// ranks sum weighted means) flipped a ReLU near zero in 2 runs of 38,
	// and that alone moved the final loss 0.1-0.4 % (seen: the same
	// records replayed in two sample orders ended 0.546169 and 0.546727,
	// 0.1 % apart); in float64 those two orders stay within 1e-15 of each
	// other over all 867 steps, while step 400 of those records applied
	// twice moves it 1.5 %, and lost 0.39 %.
	liveLossMargin   = 0.15
	liveReplayMargin = 0.0001
)

var liveArgs = []string{"--dtype", "float64", "--samples", strconv.Itoa(liveSamples), "--batch", "24", "--hidden", "64",
	"--epochs", strconv.Itoa(liveEpochs), "--lr", "0.01"}

// slowSteps is a file whose existence keeps train_live.py's
// --step-sleep on (--step-sleep-while): slow steps while a test acts on
// the job, full speed once fullSpeed removes it.
func slowSteps(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "slow")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fullSpeed(t *testing.T, slow string) {
	t.Helper()
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
}

func liveJob(name string, min, max int, extra ...string) map[string]any {
	return map[string]any{
		"name":    name,
		"workers": map[string]any{"min": min, "max": max},
		"trainer": map[string]any{"kind": "exec", "exec": map[string]any{
			"mode":           "live",
			"command":        append(append([]string{torchPython, "examples/torch/train_live.py"}, liveArgs...), extra...),
			"env":            map[string]string{"OMP_NUM_THREADS": "1"},
			"dataset":        map[string]any{"samples": liveSamples, "partitions": liveParts},
			"grace_period_s": 10,
			"max_restarts":   1,
		}},
		"checkpoint": map[string]any{"keep": 2},
	}
}

var liveStepRE = regexp.MustCompile(`^STEP step=(\d+) time=([0-9.]+) rank=(\d+) world=(\d+) gen=(\d+) `)
var evalRE = regexp.MustCompile(`^EVAL loss=([0-9.]+)`)
var startedRE = regexp.MustCompile(`msg="program started" .*?worker=(\S+)`)

// liveSteps parses the step lines of the job's programs (format at the top
// of examples/torch/train_live.py).
func (d *dev) liveSteps(job string) (steps []stepLine, evals []float64) {
	files, _ := filepath.Glob(filepath.Join(d.dataDir, "workers", job, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if m := evalRE.FindStringSubmatch(sc.Text()); m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				evals = append(evals, v)
			}
			m := liveStepRE.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			var s stepLine
			s.step, _ = strconv.ParseInt(m[1], 10, 64)
			s.at, _ = strconv.ParseFloat(m[2], 64)
			s.rank, _ = strconv.Atoi(m[3])
			s.wrld, _ = strconv.Atoi(m[4])
			s.gen, _ = strconv.ParseInt(m[5], 10, 64)
			steps = append(steps, s)
		}
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	return steps, evals
}

func (d *dev) waitLive(job string, timeout time.Duration, what string, cond func(stepLine) bool) stepLine {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		st, _ := d.liveSteps(job)
		for _, s := range st {
			if cond(s) {
				return s
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.t.Fatalf("job %s: %s not reached in %s", job, what, timeout)
	return stepLine{}
}

// waitLiveCount waits until n step lines match cond (in any generation:
// one after a kill may be short-lived when the replacement joins at once).
func (d *dev) waitLiveCount(job string, timeout time.Duration, what string, n int, cond func(stepLine) bool) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		st, _ := d.liveSteps(job)
		k := 0
		for _, s := range st {
			if cond(s) {
				k++
			}
		}
		if k >= n {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.t.Fatalf("job %s: %s not reached in %s", job, what, timeout)
}

// staticEval runs the script in one process outside edl (EDL_STANDALONE)
// and returns its EVAL loss.
func staticEval(t *testing.T) float64 {
	t.Helper()
	cmd := exec.Command(torchPython, append([]string{"examples/torch/train_live.py"}, liveArgs...)...)
	cmd.Env = append(os.Environ(), "EDL_STANDALONE=1", "EDL_PARTITIONS="+strconv.Itoa(liveParts), "OMP_NUM_THREADS=1")
	return runEval(t, "static run", cmd)
}

// runEval runs a torch program from the repository's root and returns the
// loss of its EVAL line.
func runEval(t *testing.T, what string, cmd *exec.Cmd) float64 {
	t.Helper()
	cmd.Dir = "../.."
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, tail(stderr.String(), 1000))
	}
	for _, l := range strings.Split(string(out), "\n") {
		if m := evalRE.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			return v
		}
	}
	t.Fatalf("%s printed no EVAL line:\n%s", what, tail(string(out), 500))
	return 0
}

// TestLiveScaleKillExactlyOnce: 2 -> 3 -> 2 mid-epoch, a SIGKILL of a
// worker, then of the leader, under edl dev; the programs never restart, every sample of every
// epoch is in exactly one applied step (the workers' debug records), and
// the final model is the one those steps make (its loss within 0.01 % of
// theirs replayed in one process; within 15 % of the static run's).
func TestLiveScaleKillExactlyOnce(t *testing.T) {
	needTorch(t)
	t.Setenv("EDL_DEBUG_SAMPLES", "1")
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "3")
	slow := slowSteps(t)
	j := d.submit("alice", liveJob("live", 2, 3, "--step-sleep", "0.15", "--step-sleep-while", slow))
	d.waitLive(j.ID, 120*time.Second, "first steps", func(s stepLine) bool { return s.step >= 5 })
	// The planner may start it at 3 (spare slots): 2 -> 3 -> 2 from there.
	for _, n := range []int{2, 3, 2} {
		if code := d.do("alice", "POST", "/v1/jobs/"+j.ID+"/scale", map[string]int{"workers": n}, nil); code >= 300 {
			t.Fatalf("scale to %d: status %d", n, code)
		}
		var last int64
		if st, _ := d.liveSteps(j.ID); len(st) > 0 {
			last = st[len(st)-1].gen
		}
		s := d.waitLive(j.ID, 120*time.Second, fmt.Sprintf("world %d", n), func(s stepLine) bool { return s.wrld == n && s.gen >= last })
		// Five steps at that world (a line per rank and step), in s's
		// generation or a later one of the same world: s may be of a
		// generation that had already ended (the planner grew a job it
		// started at 2 into a spare slot), and a step counter is per rank.
		d.waitLiveCount(j.ID, 60*time.Second, fmt.Sprintf("5 steps at world %d", n), 5*n, func(x stepLine) bool { return x.wrld == n && x.gen >= s.gen && x.at > s.at })
	}
	pids := d.waitWorkerPids(2, 30*time.Second)
	st, _ := d.liveSteps(j.ID)
	lastGen := st[len(st)-1].gen
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitLive(j.ID, 120*time.Second, "a generation after the kill", func(s stepLine) bool { return s.gen > lastGen })
	d.waitLiveCount(j.ID, 60*time.Second, "5 steps after the kill", 5, func(x stepLine) bool { return x.gen > lastGen })

	opt, err := redis.ParseURL(d.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	keys := coord.NewKeys("edl:", j.ID)
	// Then the leader, once the kill's replacement holds the state too (a
	// step applied at world 2 after the kill): killing the only holder
	// would lose the model, which live mode cannot restore without a
	// checkpoint. Before this wait the leader kill sometimes came while
	// the replacement was still joining, and the job never went on.
	d.waitLive(j.ID, 120*time.Second, "world 2 after the kill", func(s stepLine) bool { return s.gen > lastGen && s.wrld == 2 })
	leader, err := rdb.Get(context.Background(), keys.Leader()).Result()
	if err != nil {
		t.Fatalf("read the leader: %v", err)
	}
	lpid := workerPid(leader)
	if lpid == 0 {
		t.Fatalf("no process for leader %q", leader)
	}
	st, _ = d.liveSteps(j.ID)
	lastGen = st[len(st)-1].gen
	if err := syscall.Kill(lpid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitLive(j.ID, 120*time.Second, "a generation after the leader's kill", func(s stepLine) bool { return s.gen > lastGen })
	fullSpeed(t, slow) // nothing more to do to it: the rest of its steps at full speed
	got := d.waitJob("alice", j.ID, 5*time.Minute, "succeeded", func(j jobView) bool { return j.State == "succeeded" || j.State == "failed" })
	if got.State != "succeeded" {
		t.Fatalf("job %s, want succeeded", got.State)
	}

	// Every epoch's samples exactly once.
	recs, err := datapipe.New(rdb, keys, "check").DebugRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	missed, repeated, err := worker.CheckLiveSamples(recs, liveSamples, liveParts, liveEpochs)
	if err != nil {
		t.Fatal(err)
	}
	if missed != 0 || repeated != 0 || len(recs) == 0 {
		t.Errorf("samples missed %d, repeated %d in %d applied steps; want 0, 0", missed, repeated, len(recs))
	}

	// No program restarted: each worker started its program once (a
	// worker slot's log holds the lives of every worker in that slot).
	waitNoProcesses(t, d, j.ID, 30*time.Second)
	logs, _ := filepath.Glob(filepath.Join(d.dataDir, "workers", j.ID, "*"))
	starts := map[string]int{}
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, m := range startedRE.FindAllSubmatch(b, -1) {
			starts[string(m[1])]++
		}
	}
	if len(starts) < 4 {
		t.Errorf("programs started by %d workers (%v), want at least 4 (2, a newcomer, the kill's replacement)", len(starts), starts)
	}
	for id, n := range starts {
		if n != 1 {
			t.Errorf("worker %s started its program %d times, want once (live mode never restarts)", id, n)
		}
	}

	// The model is the one its recorded steps make: what the samples
	// check above cannot see (an update applied twice or lost at a
	// failure, replicas that drifted apart) shows as a final loss other
	// than that of the same steps replayed in one process. Not the static
	// run's: the resizes change which samples make up each step, and
	// that alone has moved the final loss from 5 % below the static one
	// to 7.8 % above it.
	_, evals := d.liveSteps(j.ID)
	if len(evals) != 1 {
		t.Fatalf("EVAL lines %v, want one (rank 0 at the end)", evals)
	}
	replay := replayEval(t, d, recs)
	if rel := math.Abs(evals[0]-replay) / replay; rel > liveReplayMargin {
		t.Errorf("final loss %.6f under resizes and kills, %.6f with the same %d steps replayed in one process: %.3f %% apart, want <= %.2f %%",
			evals[0], replay, len(recs), 100*rel, 100*liveReplayMargin)
	}
	static := staticEval(t)
	if rel := (evals[0] - static) / static; rel > liveLossMargin {
		t.Errorf("final loss %.4f under resizes and a kill, %.4f static: %.1f %% worse, want <= %.0f %%", evals[0], static, 100*rel, 100*liveLossMargin)
	}
	t.Logf("final loss %.6f elastic, %.6f its steps replayed, %.6f static; %d applied steps", evals[0], replay, static, len(recs))
}

// replayEval is the final loss of the run's applied steps (the workers'
// debug records) replayed in one process (testdata/replay_live.py).
func replayEval(t *testing.T, d *dev, recs map[int64]string) float64 {
	t.Helper()
	steps := make([]int64, 0, len(recs))
	for s := range recs {
		steps = append(steps, s)
	}
	slices.Sort(steps)
	var in strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&in, "%d %s\n", s, recs[s])
	}
	records := in.String()
	// Beside the workers' logs, for a failure's reading (EDL_TEST_KEEP).
	if err := os.WriteFile(filepath.Join(d.dataDir, "debug-records.txt"), []byte(records), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(torchPython, append([]string{"internal/e2e/testdata/replay_live.py", "--parts", strconv.Itoa(liveParts)}, liveArgs...)...)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	cmd.Stdin = strings.NewReader(records)
	return runEval(t, "replay", cmd)
}

// workerPid is the process of the worker with this id.
func workerPid(id string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), " worker ") && bytes.Contains(b, []byte("\x00--worker-id\x00"+id+"\x00")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// A live job whose program fails before it connects (a typo: an
// ImportError at its top) under edl dev: the job is failed within its
// max_restarts, the reason naming the exit and the error, and its one
// worker is never replaced. Before, the worker exited with an error after
// its restarts, the local cluster started a fresh one with a fresh count a
// second later, again and again, and the job stayed starting.
func TestLiveTypoFailsTheJob(t *testing.T) {
	needTorch(t)
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "2")
	script := filepath.Join(t.TempDir(), "typo.py")
	if err := os.WriteFile(script, []byte("import sys\nprint('typo start', file=sys.stderr)\nimport edl_no_such_module_typo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := liveJob("typo", 1, 1)
	ex := spec["trainer"].(map[string]any)["exec"].(map[string]any)
	ex["command"] = []string{torchPython, script}
	j := d.submit("alice", spec)
	j = d.waitJob("alice", j.ID, time.Minute, "an end", func(j jobView) bool { return j.State == "failed" || j.State == "succeeded" || j.State == "cancelled" })
	for _, want := range []string{"failed 2 times before it connected", "max_restarts 1", "exit code 1",
		"ModuleNotFoundError: No module named 'edl_no_such_module_typo'"} {
		if j.State != "failed" || !strings.Contains(j.Reason, want) {
			t.Errorf("job %s (%q), want failed with %q in the reason", j.State, j.Reason, want)
		}
	}
	time.Sleep(3 * time.Second) // the local cluster's restart delay is 1 s
	var ws struct {
		Workers []struct {
			ID string `json:"id"`
		} `json:"workers"`
	}
	if code := d.do("alice", "GET", "/v1/jobs/"+j.ID+"/workers", nil, &ws); code != 200 {
		t.Fatalf("workers: status %d", code)
	}
	if len(ws.Workers) != 1 {
		t.Errorf("workers %+v, want the one (never replaced)", ws.Workers)
	}
}
