package restart

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
)

const python = "/usr/bin/python3"

func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		testenv.Unavailable(t, "%s with torch: %v", python, err)
	}
}

// warmProg reports how it was started, one JSON file per run, and runs
// until its generation is replaced; in generation 2 rank 0 exits 0 once
// every rank of the generation has reported, which ends the job.
const warmProg = `import atexit, json, os, sys
early = "torch" in sys.modules
import torch
out, gen, rank, world = os.environ["OUT"], int(os.environ["EDL_GENERATION"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
with open("/proc/self/comm") as f:
    comm = f.read().strip()
rec = {"gen": gen, "rank": rank, "world": world, "pid": os.getpid(), "early": early, "comm": comm,
       "argv": sys.argv, "file": __file__, "name": __name__, "path0": sys.path[0], "cwd": os.getcwd(),
       "master": os.environ["MASTER_ADDR"] + ":" + os.environ["MASTER_PORT"]}
tmp = os.path.join(out, ".run.%d.%d" % (gen, rank))
with open(tmp, "w") as f:
    json.dump(rec, f)
os.rename(tmp, os.path.join(out, "run.%d.%d" % (gen, rank)))
import time
while True:
    if gen >= 2 and rank == 0 and all(os.path.exists(os.path.join(out, "run.%d.%d" % (gen, r))) for r in range(world)):
        sys.exit(0)
    time.sleep(0.05)
`

type warmRec struct {
	Gen, Rank, World, Pid   int
	Early                   bool
	Comm, File, Name, Path0 string
	Cwd, Master             string
	Argv                    []string
}

func readRuns(t *testing.T, dir string) map[string]warmRec {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "run.*"))
	out := map[string]warmRec{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r warmRec
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimPrefix(filepath.Base(f), "run.")] = r
	}
	return out
}

// TestWarmRestartRunsLikeCold: a Python program in restart mode, started
// by two workers, then restarted at world 3 when a third joins, sees the
// same argv, __file__, __name__, sys.path[0], cwd, generation environment
// and process name warm as cold, in a fresh process for every run; the
// one difference is torch imported before its first line when warm.
func TestWarmRestartRunsLikeCold(t *testing.T) {
	needTorch(t)
	progDir := t.TempDir()
	script := filepath.Join(progDir, "prog.py")
	if err := os.WriteFile(script, []byte(warmProg), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := map[bool]map[string]warmRec{}
	for _, warm := range []bool{true, false} {
		r := newExecRunOf(t, 2, 3, 3, func(e *jobs.ExecTrainer) {
			e.Command = []string{python, "-u", "prog.py", "--lr", "0.1"}
			e.Workdir = progDir
			e.Warm = &warm
			e.Env["OMP_NUM_THREADS"] = "1"
		})
		r.add("w0")
		r.add("w1")
		waitFiles(t, r.out, "run.1.*", 2)
		r.add("w2")
		st, reason := r.wait(120 * time.Second)
		if st != jobs.Succeeded {
			t.Fatalf("warm %v: job %s (%s), want succeeded", warm, st, reason)
		}
		got := readRuns(t, r.out)
		for _, e := range r.jobs.Events {
			if strings.Contains(e.Message, "cold") {
				t.Errorf("warm %v: event %q", warm, e.Message)
			}
		}
		runs[warm] = got
	}
	for _, warm := range []bool{true, false} {
		got := runs[warm]
		if len(got) != 5 {
			t.Fatalf("warm %v: runs %v, want 2 in generation 1 and 3 in generation 2", warm, got)
		}
		pids := map[int]bool{}
		for k, rec := range got {
			if pids[rec.Pid] {
				t.Errorf("warm %v: run %s in pid %d, which ran another run", warm, k, rec.Pid)
			}
			pids[rec.Pid] = true
			if rec.Early != warm {
				t.Errorf("warm %v: run %s: torch imported before the program's first line: %v", warm, k, rec.Early)
			}
			want := warmRec{Gen: rec.Gen, Rank: rec.Rank, World: map[int]int{1: 2, 2: 3}[rec.Gen], Pid: rec.Pid, Early: rec.Early,
				Comm: "python3", File: script, Name: "__main__", Path0: progDir, Cwd: progDir, Master: rec.Master,
				Argv: []string{"prog.py", "--lr", "0.1"}}
			if strings.Join(rec.Argv, " ") != strings.Join(want.Argv, " ") || rec.Comm != want.Comm || rec.File != want.File ||
				rec.Name != want.Name || rec.Path0 != want.Path0 || rec.Cwd != want.Cwd || rec.World != want.World {
				t.Errorf("warm %v: run %s saw %+v, want %+v", warm, k, rec, want)
			}
			if rec.Master != got["1.0"].Master && rec.Gen == 1 || rec.Master != got["2.0"].Master && rec.Gen == 2 {
				t.Errorf("warm %v: run %s: master %s differs from its rank 0's", warm, k, rec.Master)
			}
		}
	}
}

// TestWarmStartFallsBackCold: an interpreter that dies in its preloads,
// or hangs in them past WarmTimeout, costs the job nothing but the warm
// start: the program starts cold, a job event says why, and the job
// succeeds. One that dies names its exit and its last stderr lines when it
// wrote some, with no empty "last stderr lines:" when it wrote none.
func TestWarmStartFallsBackCold(t *testing.T) {
	needTorch(t)
	for _, tc := range []struct {
		name, module, want, end string
	}{
		{"dies", "import os\nos._exit(7)\n", "exited before it was ready", "(exit code 7)"},
		{"dies saying why", "import os, sys\nsys.stderr.write('no GPU here\\n')\nsys.stderr.flush()\nos._exit(7)\n",
			"exited before it was ready", "(exit code 7); last stderr lines: no GPU here"},
		{"hangs", "import time\ntime.sleep(3600)\n", "not ready within", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "edl_test_preload.py"), []byte(tc.module), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte("import os\nopen(os.path.join(os.environ['OUT'], 'ran'), 'w').close()\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := newExecRunOf(t, 1, 1, 0, func(e *jobs.ExecTrainer) {
				e.Command = []string{python, "prog.py"}
				e.Workdir = dir
				e.Preload = []string{"edl_test_preload"}
				e.Env["PYTHONPATH"] = dir
			})
			r.warmTimeout = 2 * time.Second
			r.add("w0")
			st, reason := r.wait(60 * time.Second)
			if st != jobs.Succeeded {
				t.Fatalf("job %s (%s), want succeeded", st, reason)
			}
			if _, err := os.Stat(filepath.Join(r.out, "ran")); err != nil {
				t.Fatalf("the program did not run: %v", err)
			}
			var cold []string
			for _, e := range r.jobs.Events {
				if strings.Contains(e.Message, "starts its program cold") {
					cold = append(cold, e.Message)
				}
			}
			if len(cold) != 1 || !strings.Contains(cold[0], tc.want) || !strings.HasSuffix(cold[0], tc.end) {
				t.Errorf("cold-start events %q, want one with %q ending %q", cold, tc.want, tc.end)
			}
		})
	}
}

// The next interpreter starts at once in a job's first generation (no
// member restarts beside it) and warmAfter into any later one.
func TestWarmDelay(t *testing.T) {
	for _, c := range []struct {
		reason string
		want   time.Duration
	}{{coord.ReasonStart, 0}, {"failure", warmAfter}, {"join", warmAfter}, {"leave", warmAfter}} {
		if got := warmDelay(&coord.Generation{Number: 3, Reason: c.reason}); got != c.want {
			t.Errorf("generation formed for %q: next interpreter after %s, want %s", c.reason, got, c.want)
		}
	}
}
