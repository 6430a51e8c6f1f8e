package warm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
)

const python = "/usr/bin/python3"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want Command
		err  string
	}{
		{argv: []string{"/usr/bin/python3", "train.py", "--lr", "0.1"},
			want: Command{Interp: "/usr/bin/python3", Script: "train.py", Args: []string{"--lr", "0.1"}}},
		{argv: []string{"python", "-u", "-X", "dev", "-Wignore", "-OO", "t.py"},
			want: Command{Interp: "python", Opts: []string{"-u", "-X", "dev", "-Wignore", "-OO"}, Script: "t.py", Args: []string{}}},
		{argv: []string{"python3.11", "-u", "-m", "pkg.train", "-m", "x"},
			want: Command{Interp: "python3.11", Opts: []string{"-u"}, Module: "pkg.train", Args: []string{"-m", "x"}}},
		{argv: []string{"python3", "-mpkg", "a"}, want: Command{Interp: "python3", Module: "pkg", Args: []string{"a"}}},
		{argv: []string{"python3", "--", "-odd.py"}, want: Command{Interp: "python3", Script: "-odd.py", Args: []string{}}},
		{argv: []string{"torchrun", "train.py"}, err: "not a Python interpreter"},
		{argv: []string{"bash", "-c", "python3 t.py"}, err: "not a Python interpreter"},
		{argv: []string{"python3", "-c", "print(1)"}, err: "-c"},
		{argv: []string{"python3", "-"}, err: "stdin"},
		{argv: []string{"python3", "-i", "t.py"}, err: "interactive"},
		{argv: []string{"python3", "-Z", "t.py"}, err: "-Z"},
		{argv: []string{"python3", "-u"}, err: "no script"},
		{argv: []string{"python3", "-m"}, err: "-m without a module"},
		{argv: []string{"python3", "-W"}, err: "-W without a value"},
		{argv: nil, err: "no command"},
	} {
		got, err := Parse(tc.argv)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %+v, %v; want an error with %q", tc.argv, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.argv, got, err, tc.want)
		}
	}
}

func needPython(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		testenv.Unavailable(t, "%s with torch: %v", python, err)
	}
}

// The program tells what a program can see of how it was started.
const program = `import atexit, json, os, sys
early = "torch" in sys.modules
import multiprocessing as mp
G = "module global"
def square(x):
    return x * x
def bye():
    print(json.dumps({"atexit": G}), flush=True)
if __name__ == "__main__":  # not in the pool's process: it may be terminated
    atexit.register(bye)
    pool = None
    if os.environ.get("POOL"):
        with mp.get_context("spawn").Pool(1) as p:
            pool = p.map(square, [1, 2, 3])
    print(json.dumps({"name": __name__, "file": __file__, "argv": sys.argv, "path0": sys.path[0],
        "cwd": os.getcwd(), "rank": os.environ.get("RANK"), "base": os.environ.get("BASE"),
        "leak": [k for k in globals() if k.startswith("_edl")], "pool": pool,
        "unbuffered": not sys.stdout.line_buffering and sys.flags.optimize == 0}), flush=True)
    print(json.dumps({"torch_before_import": early}), flush=True)
    if os.environ.get("FAIL"):
        raise ValueError("boom " + os.environ["FAIL"])
    sys.exit(int(os.environ.get("EXIT", "0")))
`

type run struct {
	code           int
	stdout, stderr string
}

func cold(t *testing.T, dir string, argv, env []string) run {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	return wait(t, cmd)
}

// warmRun starts argv warm with base, then hands it env; it returns the run
// and how long the program took from Go to its first line of output.
func warmRun(t *testing.T, dir string, argv, base, env []string) run {
	t.Helper()
	c, err := Parse(argv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBoot()
	if err != nil {
		t.Fatal(err)
	}
	wa := c.Argv(bootPath(t), 3, 4, []string{"torch"})
	cmd := exec.Command(wa[0], wa[1:]...)
	cmd.Dir, cmd.Env, cmd.ExtraFiles = dir, base, b.ChildFiles()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Start()
	b.Started()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if fails, err := b.WaitReady(ctx); err != nil || len(fails) > 0 {
		t.Fatalf("not ready: %v (failed preloads %v); stderr: %s", err, fails, errb.String())
	}
	if err := b.Go(env, ""); err != nil {
		t.Fatal(err)
	}
	return finish(t, cmd, &out, &errb)
}

func wait(t *testing.T, cmd *exec.Cmd) run {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return finish(t, cmd, &out, &errb)
}

func finish(t *testing.T, cmd *exec.Cmd, out, errb *bytes.Buffer) run {
	t.Helper()
	err := cmd.Wait()
	r := run{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestWarmRunsLikeCold: the same program, run cold and warm, sees the same
// argv, __name__, __file__, sys.path[0], cwd, environment and exit, its
// atexit handlers and spawned processes work, and none of boot.py's names
// reach it; the one difference is torch already imported.
func TestWarmRunsLikeCold(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg", "__init__.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg", "prog.py"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=/usr/bin:/bin", "BASE=kept", "OMP_NUM_THREADS=1"}
	for _, tc := range []struct {
		name string
		argv []string
		env  []string
	}{
		{"script", []string{python, "-u", "prog.py", "a", "--b"}, []string{"RANK=3", "EXIT=3", "POOL=1"}},
		{"module", []string{python, "-m", "pkg.prog", "x"}, []string{"RANK=1"}},
		{"exception", []string{python, "prog.py"}, []string{"RANK=0", "FAIL=here"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(append([]string{}, base...), tc.env...)
			c := cold(t, dir, tc.argv, env)
			w := warmRun(t, dir, tc.argv, base, env)
			coldOut, coldTorch := split(c.stdout)
			warmOut, warmTorch := split(w.stdout)
			if !reflect.DeepEqual(coldOut, warmOut) || c.code != w.code {
				t.Errorf("cold and warm differ:\ncold (exit %d): %s\nwarm (exit %d): %s\nwarm stderr: %s", c.code, c.stdout, w.code, w.stdout, w.stderr)
			}
			if coldTorch != `{"torch_before_import": false}` || warmTorch != `{"torch_before_import": true}` {
				t.Errorf("torch imported before the program's import: cold %q, warm %q; want false, true", coldTorch, warmTorch)
			}
			if !strings.Contains(c.stdout, `"atexit": "module global"`) || tc.name == "script" && !strings.Contains(c.stdout, `"pool": [1, 4, 9]`) {
				t.Errorf("no atexit line in %s", c.stdout)
			}
			if tc.name == "exception" {
				last := func(s string) string {
					l := strings.Split(strings.TrimSpace(s), "\n")
					return l[len(l)-1]
				}
				if c.code != 1 || last(c.stderr) != "ValueError: boom here" || last(w.stderr) != last(c.stderr) {
					t.Errorf("exception: cold exit %d %q, warm exit %d %q", c.code, last(c.stderr), w.code, last(w.stderr))
				}
			}
		})
	}
}

// split is a run's output lines, sorted, less the line on torch, which it
// returns.
func split(out string) (lines []string, torch string) {
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, `{"torch_before_import"`) {
			torch = l
			continue
		}
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines, torch
}

// TestAbandonedWarmInterpreterExits: an interpreter the worker gives up
// (a generation it was warmed for never came) exits 0 without running
// the program.
func TestAbandonedWarmInterpreterExits(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte("print('ran')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := Parse([]string{python, "prog.py"})
	b, err := NewBoot()
	if err != nil {
		t.Fatal(err)
	}
	wa := c.Argv(bootPath(t), 3, 4, nil)
	cmd := exec.Command(wa[0], wa[1:]...)
	cmd.Dir, cmd.ExtraFiles = dir, b.ChildFiles()
	var out bytes.Buffer
	cmd.Stdout = &out
	err = cmd.Start()
	b.Started()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.Abandon()
	if err := cmd.Wait(); err != nil || out.Len() > 0 {
		t.Fatalf("abandoned: %v, output %q; want exit 0 and nothing", err, out.String())
	}
	if err := b.Go(nil, ""); err == nil {
		t.Error("Go after Abandon: no error")
	}
}

// TestFailedPreloadIsReported: a preload that does not import is named;
// the interpreter still runs the program, whose own import fails as it
// would cold.
func TestFailedPreloadIsReported(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog.py"), []byte("import no_such_module_edl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := Parse([]string{python, "prog.py"})
	b, _ := NewBoot()
	wa := c.Argv(bootPath(t), 3, 4, []string{"no_such_module_edl"})
	cmd := exec.Command(wa[0], wa[1:]...)
	cmd.Dir, cmd.ExtraFiles = dir, b.ChildFiles()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Start()
	b.Started()
	if err != nil {
		t.Fatal(err)
	}
	fails, err := b.WaitReady(context.Background())
	if err != nil || len(fails) != 1 || !strings.Contains(fails[0], "no_such_module_edl") {
		t.Fatalf("WaitReady = %v, %v; want the failed preload named", fails, err)
	}
	if err := b.Go([]string{"PATH=/usr/bin"}, ""); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(errb.String(), "ModuleNotFoundError") {
		t.Fatalf("exit %v, stderr %s; want 1 and ModuleNotFoundError", err, errb.String())
	}
}

func bootPath(t *testing.T) string {
	t.Helper()
	p, err := WriteBoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// threadsProgram sets OMP_NUM_THREADS before its first import of torch, a
// common first line of training scripts: cold, the OpenMP runtime torch
// loads reads it; warm, torch was loaded before the program ran.
const threadsProgram = `import json, os
if os.environ.get("SET"):
    os.environ["OMP_NUM_THREADS"] = os.environ["SET"]
import torch.nn
print(json.dumps({"threads": torch.get_num_threads()}), flush=True)
`

// A warm run gives the program the threads a cold run gives it, whether it
// sets OMP_NUM_THREADS itself or leaves the job's value.
func TestWarmThreadsLikeCold(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "threads.py"), []byte(threadsProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=/usr/bin:/bin", "OMP_NUM_THREADS=1"}
	argv := []string{python, "threads.py"}
	for _, set := range []string{"3", ""} {
		env := append(append([]string{}, base...), "SET="+set)
		c := cold(t, dir, argv, env)
		w := warmRun(t, dir, argv, base, env)
		if c.code != 0 || w.code != 0 || c.stdout != w.stdout {
			t.Errorf("SET=%q: cold (exit %d) %q, warm (exit %d) %q; warm stderr %s", set, c.code, c.stdout, w.code, w.stdout, w.stderr)
		}
		want := `{"threads": 1}`
		if set != "" {
			want = `{"threads": ` + set + `}`
		}
		if strings.TrimSpace(c.stdout) != want {
			t.Errorf("SET=%q: cold gave %q, want %s", set, c.stdout, want)
		}
	}
}

// tracebackProgram fails in an import made in a function, through an
// import of torch's (when the import hook is in place) or not.
const tracebackProgram = `import os, sys

def load():
    if os.environ.get("TORCH_FIRST"):
        import torch.nn
    import nonexistent_module_xyz

def main():
    load()

main()
`

// TestWarmTracebackLikeCold: a program that fails prints the traceback a
// cold run prints, line for line: none of boot.py's frames (its runner
// and its import hook) in it.
func TestWarmTracebackLikeCold(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tb.py"), []byte(tracebackProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=/usr/bin:/bin", "OMP_NUM_THREADS=1"}
	for _, torchFirst := range []string{"", "1"} {
		env := append(append([]string{}, base...), "TORCH_FIRST="+torchFirst)
		c := cold(t, dir, []string{python, "tb.py"}, env)
		w := warmRun(t, dir, []string{python, "tb.py"}, base, env)
		if c.code != 1 || w.code != 1 || c.stderr != w.stderr {
			t.Errorf("TORCH_FIRST=%q: cold (exit %d):\n%s\nwarm (exit %d):\n%s", torchFirst, c.code, c.stderr, w.code, w.stderr)
		}
	}
}
