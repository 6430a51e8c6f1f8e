package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/edl-nomad/edl/internal/testenv"
)

// The dashboard in a real browser (headless Chromium) against `edl dev`:
// the real API, planner and local cluster with real workers. With
// EDL_UI_SCREENSHOTS=DIR it also saves a screenshot of each page there
// (docs/ holds the README's).

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("EDL_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	testenv.Unavailable(t, "chromium not installed (apt-get install chromium, or set EDL_CHROMIUM)")
	return ""
}

type devProc struct {
	url         string
	user, admin string
	stderr      *testenv.Output
	dataDir     string
	cmd         *exec.Cmd
}

// binDir holds the edl command built for this package's tests, if one was.
var binDir string

// edlBinary is the edl command, built once for the package's tests.
var edlBinary = sync.OnceValues(func() (string, error) {
	var err error
	if binDir, err = os.MkdirTemp("", "edl-ui-"); err != nil {
		return "", err
	}
	return testenv.EdlBinary(binDir)
})

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var apiLine = regexp.MustCompile(`API:\s+(http://\S+)`)

// startDev builds edl and runs `edl dev` with its own data dir and client
// config (so the user's ~/.config is never touched).
func startDev(t *testing.T) *devProc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
			testenv.Unavailable(t, "redis-server not installed")
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin, err := edlBinary()
	if err != nil {
		t.Fatalf("build edl: %v", err)
	}
	d := &devProc{stderr: &testenv.Output{}, dataDir: filepath.Join(tmp, "data")}
	d.cmd = exec.Command(bin, "dev", "--data-dir", d.dataDir, "--listen", "127.0.0.1:0",
		"--slots", "2", "--grace", "5s", "--planner-interval", "200ms", "--planner-cooldown", "1s",
		"--straggler-factor", "0", "--worker-log-level", "warn")
	d.cmd.Dir = root
	d.cmd.Env = append(os.Environ(), "EDL_CONFIG="+filepath.Join(tmp, "client.json"))
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := d.cmd.StdoutPipe()
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = d.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			s := d.stderr.String()
			if len(s) > 4000 {
				s = s[len(s)-4000:]
			}
			t.Logf("edl dev stderr (tail):\n%s", s)
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for d.url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("edl dev exited before it was up: %s", d.stderr.String())
			}
			if m := apiLine.FindStringSubmatch(l); m != nil {
				d.url = m[1]
			}
		case <-deadline:
			t.Fatalf("edl dev not up after 60s: %s", d.stderr.String())
		}
	}
	go func() {
		for range lines { // keep the pipe drained
		}
	}()
	var tok struct{ Default, Admin string }
	b, err := os.ReadFile(filepath.Join(d.dataDir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.Default == "" || tok.Admin == "" {
		t.Fatalf("tokens.json %s: %v", b, err)
	}
	d.user, d.admin = tok.Default, tok.Admin
	return d
}

func (d *devProc) call(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, d.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.user)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// A job that trains for minutes on two cores in small, quick steps; the
// test ends it with edl dev.
const browserJob = `{
  "name": "browser-test",
  "workers": {"min": 1, "max": 2},
  "trainer": {"kind": "builtin", "builtin": {
    "model": {"hidden": [256, 128]},
    "dataset": {"seed": 7, "samples": 60000, "features": 64, "classes": 8, "partitions": 32},
    "epochs": 30, "batch_size": 128, "learning_rate": 0.05, "momentum": 0.9}},
  "checkpoint": {"every_steps": 300, "keep": 3}
}`

// A job that cannot fit on two slots: it waits, with the planner's reason.
const waitingJob = `{
  "name": "too-big",
  "workers": {"min": 3, "max": 3},
  "trainer": {"kind": "builtin", "builtin": {
    "model": {"hidden": [8]},
    "dataset": {"seed": 1, "samples": 1000, "features": 8, "classes": 2, "partitions": 4},
    "epochs": 1, "batch_size": 32, "learning_rate": 0.05, "momentum": 0.9}}
}`

// A deadline job that two slots cannot finish in time, admitted anyway.
const lateDeadlineJob = `{
  "name": "late", "within": "1m", "deadline_policy": "best_effort", "per_worker_speed": 100,
  "trainer": {"kind": "builtin", "builtin": {
    "model": {"hidden": [8]},
    "dataset": {"seed": 1, "samples": 1000000, "features": 8, "classes": 2, "partitions": 4},
    "epochs": 100, "batch_size": 32, "learning_rate": 0.05, "momentum": 0.9}}
}`

// waitJS polls a JavaScript expression until it returns true.
func waitJS(ctx context.Context, t *testing.T, what, expr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			html, _ := chromedp.Run(ctx, chromedp.OuterHTML("#main"))
			if len(html) > 3000 {
				html = html[:3000]
			}
			t.Fatalf("%s: not after %s; page:\n%s", what, timeout, html)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// hash moves the page to another view, as a click on a link would.
func hash(ctx context.Context, t *testing.T, h string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf("location.hash = %q; true", h))); err != nil {
		t.Fatalf("go to %s: %v", h, err)
	}
	time.Sleep(100 * time.Millisecond)
}

func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("EDL_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDashboardInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	d := startDev(t)

	var job struct {
		ID string `json:"id"`
	}
	d.call(t, http.MethodPost, "/v1/jobs", browserJob, &job)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1100),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()

	// Sign in through the form; the jobs list shows the submitted job.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.url+"/ui/"),
		chromedp.WaitVisible("#login-form"),
		chromedp.SendKeys("#token", d.user),
		chromedp.Click("#login-button"),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(ctx, t, "the jobs list shows the job", fmt.Sprintf(`!!document.querySelector('#jobs tr[data-id=%q]')`, job.ID), 20*time.Second)
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("edl-token")`))
	if err != nil || stored != d.user {
		t.Fatalf("token in sessionStorage: %q %v", stored, err)
	}
	// the state filter keeps it under running (or starting) and drops it under succeeded
	hash(ctx, t, "#/?state=succeeded")
	waitJS(ctx, t, "the succeeded filter hides the job", fmt.Sprintf(`!document.querySelector('#jobs tr[data-id=%q]') && document.querySelector('#jobs tbody').textContent.includes('no jobs')`, job.ID), 10*time.Second)
	hash(ctx, t, "#/")
	waitJS(ctx, t, "the job is training", fmt.Sprintf(`(document.querySelector('#jobs tr[data-id=%q]')||{textContent:''}).textContent.includes('running')`, job.ID), 90*time.Second)
	screenshot(ctx, t, "ui-jobs.png")

	// The job page draws a loss curve with points.
	hash(ctx, t, "#/jobs/"+job.ID)
	waitJS(ctx, t, "loss curve with points", `document.querySelectorAll('#chart-loss svg circle.pt').length >= 3 && !!document.querySelector('#chart-loss svg path.line')`, 90*time.Second)
	waitJS(ctx, t, "samples/s curve", `!!document.querySelector('#chart-rate svg path.line')`, 10*time.Second)
	waitJS(ctx, t, "the live event list", `document.querySelector('#events').textContent.includes('submitted')`, 10*time.Second)

	// A scale shows up in the worker-count plot: pin to the size it does
	// not have, then see the plot reach it, with a resize marker.
	var cur struct {
		Workers struct{ Current int } `json:"workers"`
	}
	d.call(t, http.MethodGet, "/v1/jobs/"+job.ID, "", &cur)
	want := 2
	if cur.Workers.Current == 2 {
		want = 1
	}
	d.call(t, http.MethodPost, "/v1/jobs/"+job.ID+"/scale", fmt.Sprintf(`{"workers":%d}`, want), nil)
	waitJS(ctx, t, fmt.Sprintf("worker plot reaches %d with a resize marker", want), fmt.Sprintf(`(() => {
		const p = document.querySelector('#chart-workers svg path[data-series=workers]');
		if (!p) return false;
		const v = p.getAttribute('data-values').split(',').map(Number);
		return v[v.length-1] === %d && new Set(v).size >= 2 &&
			document.querySelectorAll('#chart-workers svg line.marker-resize').length >= 1;
	})()`, want), 120*time.Second)
	waitJS(ctx, t, "a checkpoint with a download link", `!!document.querySelector('#checkpoints a.download')`, 60*time.Second)
	if os.Getenv("EDL_UI_SCREENSHOTS") != "" {
		time.Sleep(10 * time.Second) // a longer curve for the README
	}
	screenshot(ctx, t, "ui-job.png")

	// The cluster page is for admins: a tenant sees why not, the admin
	// sees the node and who holds it.
	hash(ctx, t, "#/cluster")
	var waiting struct {
		ID string `json:"id"`
	}
	d.call(t, http.MethodPost, "/v1/jobs", waitingJob, &waiting)
	waitJS(ctx, t, "tenant refused the cluster page", `document.querySelector('#cluster-error').textContent.includes('admins')`, 10*time.Second)
	// A link with #token= does not sign the tab in by itself (login
	// CSRF): the page names the tenant it would sign in as and asks.
	hash(ctx, t, "#token="+d.user+"x")
	waitJS(ctx, t, "a bad link token is refused", `!document.querySelector('#link-login').hidden && document.querySelector('#link-login-text').textContent.includes('refused')`, 10*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Click("#link-login-reject")); err != nil {
		t.Fatal(err)
	}
	hash(ctx, t, "#token="+d.admin)
	waitJS(ctx, t, "the link asks before it signs in as admin", `!document.querySelector('#link-login').hidden && document.querySelector('#link-login-text').textContent.includes('admin') && !location.hash.includes('token=')`, 10*time.Second)
	if stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("edl-token")`)); err != nil || stored != d.user {
		t.Fatalf("a #token= link was adopted before the user agreed: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Click("#link-login-reject")); err != nil {
		t.Fatal(err)
	}
	if stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("edl-token")`)); err != nil || stored != d.user {
		t.Fatalf("cancel changed the tab's token: %v", err)
	}
	hash(ctx, t, "#token="+d.admin)
	waitJS(ctx, t, "the link asks again", `!document.querySelector('#link-login').hidden && document.querySelector('#link-login-text').textContent.includes('admin')`, 10*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Click("#link-login-accept")); err != nil {
		t.Fatal(err)
	}
	if stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("edl-token")`)); err != nil || stored != d.admin {
		t.Fatalf("accepted link: token not adopted: %v", err)
	}
	hash(ctx, t, "#/cluster")
	waitJS(ctx, t, "cluster page: node held by the job", fmt.Sprintf(`document.querySelector('#nodes').textContent.includes(%q)`, job.ID), 20*time.Second)
	waitJS(ctx, t, "cluster page: the queue says why a job waits", fmt.Sprintf(`(() => {
		const row = [...document.querySelectorAll('#queue tbody tr')].find((r) => r.textContent.includes(%q));
		return !!row && row.lastElementChild.textContent.length > 3 && row.lastElementChild.textContent !== 'waiting for the planner';
	})()`, waiting.ID), 20*time.Second)
	screenshot(ctx, t, "ui-cluster.png")

	// A finished job keeps its workers and logs on its page (the job's
	// tenant signed in again).
	d.call(t, http.MethodDelete, "/v1/jobs/"+job.ID, "", nil)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`sessionStorage.setItem("edl-token", %q); true`, d.user))); err != nil {
		t.Fatal(err)
	}
	hash(ctx, t, "#/jobs/"+job.ID)
	waitJS(ctx, t, "the cancelled job's page lists its finished workers", `(() => {
		if (!document.querySelector('#job-info').textContent.includes('cancelled')) return false;
		const rows = [...document.querySelectorAll('#workers tbody tr[data-worker]')];
		return rows.length >= 1 && rows.every((r) => /complete|failed/.test(r.textContent));
	})()`, 60*time.Second)
	waitJS(ctx, t, "the cancelled job's logs are served", `document.querySelector('#logs-worker').textContent.length > 5`, 20*time.Second)

	// A best-effort deadline job it cannot finish in time: the list and
	// its page show the deadline and the at-risk badge.
	var late struct {
		ID string `json:"id"`
	}
	d.call(t, http.MethodPost, "/v1/jobs", lateDeadlineJob, &late)
	hash(ctx, t, "#/")
	waitJS(ctx, t, "the jobs list marks the deadline job at risk", fmt.Sprintf(`(document.querySelector('#jobs tr[data-id=%q] .deadline .badge.at-risk')||{}).textContent === 'at risk'`, late.ID), 30*time.Second)
	hash(ctx, t, "#/jobs/"+late.ID)
	waitJS(ctx, t, "the job page shows deadline and expected finish", `!!document.querySelector('#job-info #deadline') &&
		document.querySelector('#job-info').textContent.includes('best_effort') && !!document.querySelector('#expected-finish .badge.at-risk')`, 20*time.Second)
	d.call(t, http.MethodDelete, "/v1/jobs/"+late.ID, "", nil)

	// The API docs render under their Content-Security-Policy.
	if err := chromedp.Do(ctx, chromedp.Navigate(d.url+"/docs/index.html")); err != nil {
		t.Fatal(err)
	}
	// Its inline script ran (blocked, the page would stay empty): Swagger
	// UI drew its layout.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('#swagger-ui .swagger-ui')`))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Swagger UI did not start under its Content-Security-Policy")
		}
		time.Sleep(250 * time.Millisecond)
	}
}
