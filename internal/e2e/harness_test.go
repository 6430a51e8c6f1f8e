package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
)

var edlBin string

// raceReport begins what the race detector prints about a race.
const raceReport = "WARNING: DATA RACE"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edl-e2e-")
	if err != nil {
		panic(err)
	}
	if edlBin, err = testenv.EdlBinary(dir); err != nil {
		fmt.Fprintf(os.Stderr, "build edl: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// keepDataDir copies a failed test's edl dev data folder (every worker's
// whole log, the checkpoints, the Redis dump) under $EDL_TEST_KEEP, when
// set: the logs above show only their tails, and t.TempDir goes with the
// test.
func keepDataDir(t *testing.T, dir string) {
	root := os.Getenv("EDL_TEST_KEEP")
	if root == "" {
		return
	}
	dst := filepath.Join(root, fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()))
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Logf("keep the data folder: %v", err)
		return
	}
	// Regular files only: the folder holds the workers' sockets too.
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Logf("keep the data folder: %v", err)
		return
	}
	t.Logf("edl dev's data folder kept in %s", dst)
}

// dev is one running `edl dev` process.
type dev struct {
	t        *testing.T
	cmd      *exec.Cmd
	url      string
	redisURL string
	dataDir  string
	tokens   map[string]string
	stderr   *testenv.Output
	exited   chan struct{}
}

var redisLine = regexp.MustCompile(`Redis:\s+(redis://\S+)`)
var apiLine = regexp.MustCompile(`API:\s+(http://\S+)`)

// startDev runs `edl dev` with tenants (name -> token); extra flags appended.
func startDev(t *testing.T, tenants map[string]string, extra ...string) *dev {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
			testenv.Unavailable(t, "redis-server not installed")
		}
	}
	d := &dev{t: t, dataDir: t.TempDir(), tokens: tenants, stderr: &testenv.Output{}, exited: make(chan struct{})}
	var yaml strings.Builder
	yaml.WriteString("tenants:\n")
	for name, tok := range tenants {
		sum := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&yaml, "  - name: %s\n    token_sha256: %s\n    weight: 1\n    rate_per_s: 1000\n    burst: 1000\n", name, hex.EncodeToString(sum[:]))
	}
	tf := filepath.Join(d.dataDir, "tenants.yaml")
	if err := os.WriteFile(tf, []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"dev", "--data-dir", d.dataDir, "--listen", "127.0.0.1:0",
		"--tenants", tf, "--grace", "10s", "--planner-interval", "200ms", "--planner-cooldown", "1s",
		// Three CPU workers on two cores are unevenly slow; straggler
		// replacement is tested in planner/ and would only add noise here.
		"--straggler-factor", "0"}, extra...)
	d.cmd = exec.Command(edlBin, args...)
	d.cmd.Dir = "../.."
	stdout, _ := d.cmd.StdoutPipe()
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.interrupt()
		logs, _ := filepath.Glob(filepath.Join(d.dataDir, "workers", "*", "*.log"))
		// The edl binary has the race detector under make test: a race in
		// edl dev or a worker is a failure here, with its report.
		if s := d.stderr.String(); strings.Contains(s, raceReport) {
			t.Errorf("edl dev reported a data race:\n%s", s[strings.Index(s, raceReport):])
		}
		for _, l := range logs {
			if b, _ := os.ReadFile(l); bytes.Contains(b, []byte(raceReport)) {
				t.Errorf("%s reports a data race:\n%s", l, b[bytes.Index(b, []byte(raceReport)):])
			}
		}
		if t.Failed() {
			keepDataDir(t, d.dataDir)
			t.Logf("edl dev stderr (tail):\n%s", tail(d.stderr.String(), 4000))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s (tail):\n%s", l, tail(string(b), 1500))
			}
		}
	})
	sc := bufio.NewScanner(stdout)
	deadline := time.After(30 * time.Second)
	lines := make(chan string)
	go func() {
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for d.url == "" || d.redisURL == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("edl dev exited before it was up: %s", d.stderr.String())
			}
			if m := apiLine.FindStringSubmatch(l); m != nil {
				d.url = m[1]
			}
			if m := redisLine.FindStringSubmatch(l); m != nil {
				d.redisURL = m[1]
			}
		case <-deadline:
			t.Fatalf("edl dev not up after 30s: %s", d.stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// interrupt sends SIGINT (Ctrl-C) and waits for edl dev to exit.
func (d *dev) interrupt() {
	if d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.t.Errorf("edl dev did not exit 30s after SIGINT")
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// do sends an API request as tenant and decodes the JSON answer into out.
func (d *dev) do(tenant, method, path string, body any, out any) int {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+d.tokens[tenant])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

type jobView struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Reason   string `json:"reason"`
	Workers  struct{ Current, Target int }
	Progress struct {
		Epoch     int     `json:"epoch"`
		Step      int64   `json:"step"`
		Samples   int64   `json:"samples"`
		Loss      float64 `json:"loss"`
		WorldSize int     `json:"world_size"`
	} `json:"progress"`
}

func (d *dev) submit(tenant string, spec map[string]any) jobView {
	d.t.Helper()
	var j jobView
	if code := d.do(tenant, "POST", "/v1/jobs", spec, &j); code != 201 {
		d.t.Fatalf("submit: status %d", code)
	}
	return j
}

func (d *dev) get(tenant, id string) jobView {
	d.t.Helper()
	var j jobView
	if code := d.do(tenant, "GET", "/v1/jobs/"+id, nil, &j); code != 200 {
		d.t.Fatalf("get %s: status %d", id, code)
	}
	return j
}

// waitJob polls the job until cond holds.
func (d *dev) waitJob(tenant, id string, timeout time.Duration, what string, cond func(jobView) bool) jobView {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	var j jobView
	for time.Now().Before(deadline) {
		j = d.get(tenant, id)
		if cond(j) {
			return j
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.t.Fatalf("job %s: %s not reached in %s; last: %+v", id, what, timeout, j)
	return j
}

// waitWorkerPids waits until this edl dev has n worker processes and returns
// them: a worker the planner stopped leaves its generation first and exits a
// moment later, so a count read right after the resize can still include it.
func (d *dev) waitWorkerPids(n int, within time.Duration) []int {
	d.t.Helper()
	pids := d.workerPids()
	for deadline := time.Now().Add(within); len(pids) != n && time.Now().Before(deadline); pids = d.workerPids() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(pids) != n {
		d.t.Fatalf("worker processes %v after waiting %s, want %d", pids, within, n)
	}
	return pids
}

// workerPids lists the edl worker processes of this edl dev (they carry its
// Redis URL on their command line).
func (d *dev) workerPids() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cl := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if strings.Contains(cl, " worker ") && strings.Contains(cl, "redis://"+d.redisAddr()+" ") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// redisAddr is the child Redis's host:port (the banner's URL carries the
// password; the workers' --redis does not).
func (d *dev) redisAddr() string {
	u := d.redisURL
	if i := strings.LastIndex(u, "@"); i >= 0 {
		return u[i+1:]
	}
	return strings.TrimPrefix(u, "redis://")
}

// redisPid finds the child redis-server by its port.
func (d *dev) redisPid() int {
	port := d.redisURL[strings.LastIndex(d.redisURL, ":")+1:]
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// redis-server rewrites its title to "redis-server 127.0.0.1:PORT".
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cl, "redis-server") && (strings.Contains(cl, ":"+port+" ") || strings.Contains(cl, " "+port+" ")) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	return 0
}

// mlpJob is a built-in trainer job; epochs and samples set its length.
func mlpJob(name string, min, max, samples, epochs int) map[string]any {
	return map[string]any{
		"name":            name,
		"workers":         map[string]any{"min": min, "max": max},
		"gpus_per_worker": 0,
		"priority":        "guaranteed",
		"trainer": map[string]any{"kind": "builtin", "builtin": map[string]any{
			"model":         map[string]any{"hidden": []int{64}},
			"dataset":       map[string]any{"seed": 7, "samples": samples, "features": 32, "classes": 4, "partitions": 32},
			"epochs":        epochs,
			"batch_size":    64,
			"learning_rate": 0.05,
			"momentum":      0.9,
		}},
		"checkpoint": map[string]any{"every_steps": 100, "keep": 2},
	}
}
