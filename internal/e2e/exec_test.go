package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
)

// The exec-mode tests run examples/torch/train.py, a real DDP script for
// torchrun, with Debian's python3-torch (gloo on CPU).

const torchPython = "/usr/bin/python3"

func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command(torchPython, "-c", "import torch.distributed.run").Run(); err != nil {
		testenv.Unavailable(t, "%s with torch: %v", torchPython, err)
	}
	// The programs these tests run read these; the result cache must see them.
	testenv.TrackSources(t, "python/edl", "examples/torch")
}

// torchJob is an exec job running the example script.
func torchJob(name string, min, max int, env map[string]string, args ...string) map[string]any {
	exe := map[string]any{
		"command":        append([]string{torchPython, "examples/torch/train.py"}, args...),
		"grace_period_s": 10,
		"max_restarts":   3,
	}
	if env != nil {
		exe["env"] = env
	}
	return map[string]any{
		"name":       name,
		"workers":    map[string]any{"min": min, "max": max},
		"trainer":    map[string]any{"kind": "exec", "exec": exe},
		"checkpoint": map[string]any{"keep": 2},
	}
}

// stepLine is one "STEP ..." line of the script (format documented at the
// top of examples/torch/train.py).
type stepLine struct {
	step, gen  int64
	rank, wrld int
	at         float64
}

var stepRE = regexp.MustCompile(`^STEP step=(\d+) time=([0-9.]+) rank=(\d+) world=(\d+) restart=\d+ gen=(\d+) `)

// steps parses every step line the job's programs printed so far (the
// worker logs of edl dev hold their programs' stdout).
func (d *dev) steps(job string) []stepLine {
	files, _ := filepath.Glob(filepath.Join(d.dataDir, "workers", job, "*"))
	var out []stepLine
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			m := stepRE.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			var s stepLine
			s.step, _ = strconv.ParseInt(m[1], 10, 64)
			s.at, _ = strconv.ParseFloat(m[2], 64)
			s.rank, _ = strconv.Atoi(m[3])
			s.wrld, _ = strconv.Atoi(m[4])
			s.gen, _ = strconv.ParseInt(m[5], 10, 64)
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// waitSteps waits until the job's programs printed a step line matching cond.
func (d *dev) waitSteps(job string, timeout time.Duration, what string, cond func(stepLine) bool) stepLine {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, s := range d.steps(job) {
			if cond(s) {
				return s
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	st := d.steps(job)
	if len(st) > 3 {
		st = st[len(st)-3:]
	}
	d.t.Fatalf("job %s: %s not reached in %s; last steps %+v", job, what, timeout, st)
	return stepLine{}
}

// checkResumes asserts that every generation resumed at most every steps
// before the furthest step applied before it (the checkpoint period).
func checkResumes(t *testing.T, lines []stepLine, every int64) {
	t.Helper()
	first := map[int64]int64{} // gen -> first step applied in it
	var gens []int64
	for _, s := range lines {
		if v, ok := first[s.gen]; !ok || s.step < v {
			if !ok {
				gens = append(gens, s.gen)
			}
			first[s.gen] = s.step
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	var furthest int64
	var lastAt float64
	for _, g := range gens {
		resumed := first[g] - 1
		if resumed < furthest-every {
			t.Errorf("generation %d resumed at step %d, more than the checkpoint period %d before step %d applied earlier", g, resumed, every, furthest)
		}
		firstAt, world := 0.0, 0
		for _, s := range lines {
			if s.gen == g && (firstAt == 0 || s.at < firstAt) {
				firstAt, world = s.at, s.wrld
			}
		}
		if lastAt > 0 {
			// A figure, not an assertion: the pause includes Python's and
			// torch's start on a loaded machine.
			t.Logf("generation %d (world %d): resumed at step %d, %d steps redone, stall %.2fs", g, world, resumed, max(0, furthest-resumed), firstAt-lastAt)
		}
		for _, s := range lines {
			if s.gen == g {
				furthest = max(furthest, s.step)
				lastAt = max(lastAt, s.at)
			}
		}
	}
	if len(gens) < 2 {
		t.Errorf("only generations %v ran; the test needs restarts", gens)
	}
}

// programPids are the job's running programs (their environment names the job).
func programPids(job string) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("\x00EDL_JOB_ID="+job+"\x00")) && !bytes.HasPrefix(b, []byte("EDL_JOB_ID="+job+"\x00")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		pids = append(pids, pid)
	}
	return pids
}

func waitNoProcesses(t *testing.T, d *dev, job string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && len(programPids(job))+len(d.workerPids()) > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	if p, w := programPids(job), d.workerPids(); len(p)+len(w) > 0 {
		t.Errorf("after the job ended: programs %v and workers %v still running", p, w)
	}
}

// TestTorchScaleKillCancel resizes a running torchrun script 1 -> 3 -> 2,
// SIGKILLs a worker, then cancels: each restart resumes within a
// checkpoint period, the killed worker is replaced, and cancel leaves no
// process behind.
func TestTorchScaleKillCancel(t *testing.T) {
	needTorch(t)
	const every = 10
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "3")
	j := d.submit("alice", torchJob("ddp", 1, 3, nil, "--steps", "100000", "--ckpt-every", strconv.Itoa(every)))
	for _, n := range []int{1, 3, 2} {
		// Only a generation from the scale on counts: 1 -> 3 may pass
		// through a world of 2 (one newcomer ready before the other), and
		// a step line of that generation is not the 3 -> 2 (it once made
		// the wait below look for 5 more steps of a generation long gone).
		from := int64(0)
		for _, s := range d.steps(j.ID) {
			from = max(from, s.gen)
		}
		if code := d.do("alice", "POST", "/v1/jobs/"+j.ID+"/scale", map[string]int{"workers": n}, nil); code >= 300 {
			t.Fatalf("scale to %d: status %d", n, code)
		}
		s := d.waitSteps(j.ID, 120*time.Second, fmt.Sprintf("steps at world %d", n), func(s stepLine) bool { return s.wrld == n && s.gen >= from })
		d.waitSteps(j.ID, 60*time.Second, fmt.Sprintf("5 steps at world %d", n), func(x stepLine) bool { return x.gen == s.gen && x.step >= s.step+5 })
		got := d.get("alice", j.ID)
		if got.State != "running" || got.Progress.WorldSize != n {
			t.Fatalf("after scale to %d: state %s, world size %d", n, got.State, got.Progress.WorldSize)
		}
	}
	pids := d.waitWorkerPids(2, 30*time.Second)
	var lastGen int64 // the newest generation before the kill (the step lines come file by file)
	for _, s := range d.steps(j.ID) {
		lastGen = max(lastGen, s.gen)
	}
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s := d.waitSteps(j.ID, 120*time.Second, "world 2 again after the kill", func(s stepLine) bool { return s.gen > lastGen && s.wrld == 2 })
	d.waitSteps(j.ID, 60*time.Second, "steps after the kill", func(x stepLine) bool { return x.gen == s.gen && x.step >= s.step+3 })
	if ps := d.workerPids(); len(ps) != 2 || ps[0] == pids[1] || ps[1] == pids[1] {
		t.Errorf("worker processes after the kill %v, want 2 without %d", ps, pids[1])
	}
	checkResumes(t, d.steps(j.ID), every)
	t.Logf("edl's part of each restart (stop decision to the new start, per worker): %s", strings.Join(d.restartTimes(j.ID), " "))

	if code := d.do("alice", "DELETE", "/v1/jobs/"+j.ID, nil, nil); code != 202 {
		t.Fatalf("cancel: status %d, want 202", code)
	}
	d.waitJob("alice", j.ID, 60*time.Second, "cancelled", func(j jobView) bool { return j.State == "cancelled" })
	waitNoProcesses(t, d, j.ID, 15*time.Second)
}

// TestTorchScriptUnderEdlAndTorchrun trains the script to succeeded under
// edl dev with min == max == 2, then runs it under torchrun (two agents of
// one process each, the shape edl gives it), and compares the environment
// each process received.
func TestTorchScriptUnderEdlAndTorchrun(t *testing.T) {
	needTorch(t)
	edlDump, trDump := t.TempDir(), t.TempDir()
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "2")
	j := d.submit("alice", torchJob("static", 2, 2, map[string]string{"TRAIN_DUMP_ENV": edlDump}, "--steps", "12", "--ckpt-every", "5"))
	got := d.waitJob("alice", j.ID, 180*time.Second, "succeeded", func(j jobView) bool { return j.State == "succeeded" || j.State == "failed" })
	if got.State != "succeeded" {
		t.Fatalf("job ended %s (%s)", got.State, got.Reason)
	}
	last := d.steps(j.ID)
	if len(last) == 0 || last[len(last)-1].step != 12 || last[len(last)-1].wrld != 2 {
		t.Fatalf("last step line %+v, want step 12 at world 2", last)
	}
	waitNoProcesses(t, d, j.ID, 15*time.Second)

	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var agents []*exec.Cmd
	for i := range 2 {
		cmd := exec.Command(torchPython, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
			"--rdzv_backend", "c10d", "--rdzv_endpoint", fmt.Sprintf("127.0.0.1:%d", port), "--rdzv_id", "envcmp",
			"--max_restarts", "3", "--redirects", "1", "--tee", "1", "--log_dir", filepath.Join(t.TempDir(), "logs"),
			"examples/torch/train.py", "--steps", "2", "--ckpt-dir", t.TempDir())
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "TRAIN_DUMP_ENV="+trDump)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("torchrun agent %d output:\n%s", i, tail(out.String(), 3000))
			}
		})
		agents = append(agents, cmd)
	}
	for i, a := range agents {
		done := make(chan error, 1)
		go func() { done <- a.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("torchrun agent %d: %v", i, err)
			}
		case <-time.After(180 * time.Second):
			_ = a.Process.Kill()
			t.Fatalf("torchrun agent %d did not finish", i)
		}
	}

	parent := map[string]bool{"TRAIN_DUMP_ENV": true}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		parent[k] = true
	}
	// What edl dev's local cluster adds for every worker, and edl's own.
	for _, k := range []string{"EDL_WORKER_INDEX", "NVIDIA_VISIBLE_DEVICES"} {
		parent[k] = true
	}
	edlOwn := map[string]bool{"EDL_JOB_ID": true, "EDL_GENERATION": true, "EDL_CHECKPOINT_DIR": true, "EDL_METRICS_FILE": true, "CUDA_VISIBLE_DEVICES": true}
	te, ee := readEnvDumps(t, trDump), readEnvDumps(t, edlDump)
	if len(te) != 2 || len(ee) != 2 {
		t.Fatalf("env dumps: torchrun %d, edl %d; want 2 each", len(te), len(ee))
	}
	// The variable names each system sets.
	trNames, edlNames := setNames(te[0], parent), setNames(ee[0], parent)
	for k := range edlOwn {
		delete(edlNames, k)
	}
	t.Logf("variables torchrun sets: %s", strings.Join(sortedSet(trNames), " "))
	if len(trNames) < 15 {
		t.Errorf("torchrun set only %v: the dumps did not come from torchrun's workers", sortedSet(trNames))
	}
	if a, b := strings.Join(sortedSet(trNames), " "), strings.Join(sortedSet(edlNames), " "); a != b {
		t.Errorf("variables set by torchrun:\n  %s\nby edl (besides EDL_* and CUDA_VISIBLE_DEVICES):\n  %s", a, b)
	}
	// Same values where the two must agree.
	for _, sys := range []struct {
		name string
		envs []map[string]string
	}{{"torchrun", te}, {"edl", ee}} {
		ranks := map[string]bool{}
		for _, e := range sys.envs {
			ranks[e["RANK"]] = true
			for k, want := range map[string]string{"WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": e["RANK"],
				"ROLE_RANK": e["RANK"], "ROLE_NAME": "default", "GROUP_WORLD_SIZE": "2", "ROLE_WORLD_SIZE": "2",
				"TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "3", "TORCHELASTIC_USE_AGENT_STORE": "False",
				"NCCL_ASYNC_ERROR_HANDLING": "1", "MASTER_PORT": sys.envs[0]["MASTER_PORT"], "MASTER_ADDR": sys.envs[0]["MASTER_ADDR"]} {
				if e[k] != want {
					t.Errorf("%s rank %s: %s=%q, want %q", sys.name, e["RANK"], k, e[k], want)
				}
			}
		}
		if !ranks["0"] || !ranks["1"] {
			t.Errorf("%s ranks %v, want 0 and 1", sys.name, ranks)
		}
	}
	if ee[0]["TORCHELASTIC_RUN_ID"] != j.ID || te[0]["TORCHELASTIC_RUN_ID"] != "envcmp" {
		t.Errorf("run ids: edl %q (want the job id %s), torchrun %q", ee[0]["TORCHELASTIC_RUN_ID"], j.ID, te[0]["TORCHELASTIC_RUN_ID"])
	}
}

func readEnvDumps(t *testing.T, dir string) []map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "env.rank*.json"))
	var out []map[string]string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, m)
	}
	// A restart (a worker that joined late) dumps again: keep the newest
	// generation's process of each rank.
	best := map[string]map[string]string{}
	for _, m := range out {
		if b, ok := best[m["RANK"]]; !ok || atoi(m["EDL_GENERATION"]) > atoi(b["EDL_GENERATION"]) {
			best[m["RANK"]] = m
		}
	}
	out = out[:0]
	for _, r := range sortedKeys(best) {
		out = append(out, best[r])
	}
	return out
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func setNames(env map[string]string, parent map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k := range env {
		if !parent[k] {
			out[k] = true
		}
	}
	return out
}

func sortedSet(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var sinceStopRE = regexp.MustCompile(`msg="program started".* gen=(\d+) .*since_stop=(\S+)`)

// restartTimes are the workers' "since_stop" figures, "gen:duration".
func (d *dev) restartTimes(job string) []string {
	files, _ := filepath.Glob(filepath.Join(d.dataDir, "workers", job, "*"))
	var out []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			if m := sinceStopRE.FindStringSubmatch(l); m != nil && m[2] != "0s" {
				out = append(out, m[1]+":"+m[2])
			}
		}
	}
	sort.Strings(out)
	return out
}
