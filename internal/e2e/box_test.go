package e2e

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A tenant's program stays in its box: what it leaves behind dies with
// it, and it reaches no other job in Redis (docs/exec.md, safety).

func execJob(name string, min, max int, command ...string) map[string]any {
	return map[string]any{
		"name":    name,
		"workers": map[string]any{"min": min, "max": max},
		"trainer": map[string]any{"kind": "exec", "exec": map[string]any{
			"command": command, "grace_period_s": 2, "max_restarts": 0}},
	}
}

// pidFiles reads the pids the daemons program wrote, by file name.
func pidFiles(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if strings.HasSuffix(f, ".tmp") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = pid
	}
	return out
}

func aliveOf(pids map[string]int) []string {
	var out []string
	for name, p := range pids {
		if syscall.Kill(p, 0) == nil {
			out = append(out, name+"="+strconv.Itoa(p))
		}
	}
	return out
}

// TestExecDaemonsDieWithTheJob: a program's setsid daemon and its child in
// a group of its own die at a resize restart and at cancel, and cancel is
// not held up by them though they hold the program's output pipes.
func TestExecDaemonsDieWithTheJob(t *testing.T) {
	needTorch(t) // for /usr/bin/python3; the program does not import torch
	d := startDev(t, map[string]string{"alice": "tok-alice"}, "--slots", "2")
	dir := t.TempDir()
	j := d.submit("alice", execJob("daemons", 1, 2, torchPython, "internal/e2e/testdata/daemons.py", dir))
	// complete is the newest generation whose every rank wrote its three
	// pids (file names are generation-rank-world-tag), and its world.
	complete := func(after int) (gen, world int) {
		deadline := time.Now().Add(120 * time.Second)
		for {
			count, worlds := map[int]int{}, map[int]int{}
			for name := range pidFiles(t, dir) {
				f := strings.Split(name, "-")
				g, w := atoi(f[0]), atoi(f[2])
				count[g]++
				worlds[g] = w
			}
			for g, n := range count {
				if g > after && g > gen && n == 3*worlds[g] {
					gen, world = g, worlds[g]
				}
			}
			if gen > 0 {
				return gen, world
			}
			if time.Now().After(deadline) {
				t.Fatalf("no complete generation after %d: pid files %v", after, pidFiles(t, dir))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	gen, world := complete(0)
	if code := d.do("alice", "POST", "/v1/jobs/"+j.ID+"/scale", map[string]int{"workers": 3 - world}, nil); code >= 300 {
		t.Fatalf("scale: status %d", code)
	}
	complete(gen) // a restart at the new size
	all := pidFiles(t, dir)
	old := map[string]int{}
	for name, pid := range all {
		if atoi(strings.Split(name, "-")[0]) <= gen {
			old[name] = pid
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(aliveOf(old)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := aliveOf(old); len(left) > 0 {
		t.Errorf("after the resize restart, processes of generation %d's programs still run: %v", gen, left)
	}
	start := time.Now()
	if code := d.do("alice", "DELETE", "/v1/jobs/"+j.ID, nil, nil); code != 202 {
		t.Fatalf("cancel: status %d, want 202", code)
	}
	d.waitJob("alice", j.ID, 60*time.Second, "cancelled", func(j jobView) bool { return j.State == "cancelled" })
	took := time.Since(start)
	waitNoProcesses(t, d, j.ID, 15*time.Second)
	if left := aliveOf(all); len(left) > 0 {
		t.Errorf("after cancel, processes of the program still run: %v", left)
	}
	// Not a benchmark, a correctness bound: the workers stop on their own
	// (program grace 2 s), not when edl dev's grace (10 s here) runs out
	// and it SIGKILLs them, as when daemons held the pipes or the workers
	// lost their Redis login before they were done.
	if took >= 10*time.Second {
		t.Errorf("cancel took %s: the workers were killed at edl dev's grace instead of stopping", took)
	}
	t.Logf("cancel to cancelled: %s (grace_period_s 2)", took.Round(10*time.Millisecond))
}

// TestHostileProgramReachesNoOtherJob runs testdata/hostile.py as an exec
// job beside another tenant's job: it looks for edl's credentials above
// it in /proc and tries another job's keys and channels, anonymously and
// then (where it may read its worker's memory: root) with its own workers'
// login; every attempt must fail.
func TestHostileProgramReachesNoOtherJob(t *testing.T) {
	needTorch(t)
	d := startDev(t, map[string]string{"alice": "tok-alice", "mallory": "tok-mallory"}, "--slots", "2")
	victim := d.submit("alice", mlpJob("victim", 1, 1, 2_000_000, 50))
	d.waitJob("alice", victim.ID, 120*time.Second, "running", func(j jobView) bool { return j.State == "running" })
	h := d.submit("mallory", execJob("hostile", 1, 1, torchPython, "internal/e2e/testdata/hostile.py", victim.ID))
	d.waitJob("mallory", h.ID, 180*time.Second, "succeeded", func(j jobView) bool { return j.State == "succeeded" || j.State == "failed" })

	opt, err := redis.ParseURL(d.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(opt)
	defer admin.Close()
	secret, err := admin.Get(context.Background(), "edl:acl:secret").Result()
	if err != nil {
		t.Fatalf("the worker ACL secret: %v", err)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("edl:" + h.ID))
	secrets := map[string]string{"admin password": opt.Password, "the job's worker password": hex.EncodeToString(m.Sum(nil))}

	logs, _ := filepath.Glob(filepath.Join(d.dataDir, "workers", h.ID, "*.stdout.log"))
	if len(logs) == 0 {
		t.Fatal("no stdout log of the hostile job's worker")
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	if !strings.Contains(out, "HOSTILE DONE") {
		t.Fatalf("the hostile program did not finish:\n%s", out)
	}
	// Attacks that work by design: reading its own job, and (as root)
	// the worker's memory and the login found in it.
	expected := map[string]bool{"own-job-readable": true, "worker-memory": true, "login-as-own-workers": true}
	attacks, loggedIn := 0, false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "PROC ") {
			for what, s := range secrets {
				if strings.Contains(line, s) {
					t.Errorf("%s readable by the program: %.120s", what, line)
				}
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "ATTACK" {
			continue
		}
		attacks++
		if f[1] == "login-as-own-workers" && f[2] == "OPEN" {
			loggedIn = true
		}
		if f[2] == "OPEN" && !expected[f[1]] {
			t.Errorf("attack succeeded: %s", line)
		}
		t.Log(line)
	}
	if attacks < 12 {
		t.Errorf("only %d attacks reported:\n%s", attacks, out)
	}
	if os.Geteuid() == 0 && !loggedIn {
		// As root the program can read its worker's memory: the test
		// must then also have tried with the workers' own login.
		t.Errorf("running as root, the program did not find its workers' login: the own-login attacks did not run")
	}
}
