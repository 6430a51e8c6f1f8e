package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

const (
	cliTokA = "cli-token-a"
	cliTokB = "cli-token-b"
)

// fakeCheckpoints is a hand-written CheckpointView: one job's checkpoints
// with their model bytes.
type fakeCheckpoints struct {
	job    string
	models map[int64][]byte
	badSum bool // report a wrong SHA-256, as a corrupted download would
}

func (f fakeCheckpoints) ListCheckpoints(_ context.Context, job string) ([]api.Checkpoint, error) {
	if job != f.job {
		return nil, nil
	}
	var out []api.Checkpoint
	for step, m := range f.models {
		out = append(out, api.Checkpoint{Step: step, Epoch: int(step / 100), Generation: 1, WorldSize: 2,
			SizeBytes: int64(len(m)), CreatedAt: time.Unix(1700000000+step, 0).UTC()})
	}
	// newest first, as the API promises
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k].Step > out[k-1].Step; k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out, nil
}

func (f fakeCheckpoints) OpenModel(_ context.Context, job string, step int64) (io.ReadCloser, api.CheckpointShard, error) {
	m, ok := f.models[step]
	if job != f.job || !ok {
		return nil, api.CheckpointShard{}, jobs.ErrNotFound
	}
	sum := sha256.Sum256(m)
	if f.badSum {
		sum[0] ^= 0xff
	}
	return io.NopCloser(bytes.NewReader(m)), api.CheckpointShard{Name: "params", Size: int64(len(m)), SHA256: hex.EncodeToString(sum[:])}, nil
}

type cliEnv struct {
	t     *testing.T
	url   string
	store *jobstore.Store
	ck    *fakeCheckpoints
}

// newCLIEnv runs the real API over a real Redis, and points the client
// config at a file of the test's own.
func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	ts, err := jobs.NewTenants(
		jobs.Tenant{Name: "team-a", TokenSHA256: jobs.HashToken(cliTokA), RatePerS: 10000, Burst: 10000},
		jobs.Tenant{Name: "team-b", TokenSHA256: jobs.HashToken(cliTokB), RatePerS: 10000, Burst: 10000},
	)
	if err != nil {
		t.Fatal(err)
	}
	ck := &fakeCheckpoints{models: map[int64][]byte{}}
	srv := api.New(api.Config{Checkpoints: ck}, store, ts, nil, nil)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Setenv("EDL_CONFIG", filepath.Join(t.TempDir(), "edl", "config.json"))
	t.Setenv("EDL_SERVER", "")
	t.Setenv("EDL_TOKEN", "")
	t.Setenv("NO_COLOR", "")
	return &cliEnv{t: t, url: hs.URL, store: store, ck: ck}
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// run runs `edl args...` as team-a.
func (e *cliEnv) run(args ...string) cliResult {
	e.t.Helper()
	return e.runAs(cliTokA, args...)
}

func (e *cliEnv) runAs(token string, args ...string) cliResult {
	e.t.Helper()
	var out, errb bytes.Buffer
	full := append(append([]string{}, args...), "--server", e.url, "--token", token)
	code := runMain(full, &out, &errb)
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func (e *cliEnv) submit(name string) jobs.Job {
	e.t.Helper()
	spec := specFile(e.t, map[string]any{"name": name, "labels": map[string]string{"team": name}})
	r := e.run("submit", spec, "-o", "json")
	if r.code != 0 {
		e.t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	var j jobs.Job
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		e.t.Fatalf("submit -o json printed %q: %v", r.stdout, err)
	}
	return j
}

// specFile writes the example job with fields replaced and returns its path.
func specFile(t *testing.T, fields map[string]any) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ = json.Marshal(m)
	p := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClientSubmitLsGet(t *testing.T) {
	e := newCLIEnv(t)
	a := e.submit("alpha")
	b := e.submit("beta")
	if a.ID == "" || a.State != jobs.Pending || a.Tenant != "team-a" {
		t.Fatalf("submitted job %+v", a)
	}

	r := e.run("ls")
	if r.code != 0 {
		t.Fatalf("ls: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("ls printed %d lines, want a header and 2 jobs:\n%s", len(lines), r.stdout)
	}
	// newest first, aligned columns: STATE starts at the same offset in every row
	if !strings.HasPrefix(lines[1], b.ID) || !strings.HasPrefix(lines[2], a.ID) {
		t.Fatalf("ls order, want %s then %s:\n%s", b.ID, a.ID, r.stdout)
	}
	col := strings.Index(lines[0], "STATE")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "pending") {
			t.Errorf("row %q: state not under the STATE column (%d)", l, col)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("colour codes written to a non-terminal:\n%q", r.stdout)
	}

	r = e.run("ls", "--label", "team=alpha", "-o", "json")
	var list api.JobList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Jobs) != 1 || list.Jobs[0].ID != a.ID {
		t.Fatalf("ls --label team=alpha -o json: %v %s", err, r.stdout)
	}
	r = e.run("ls", "--status", "running")
	if n := strings.Count(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || n != 0 {
		t.Fatalf("ls --status running: exit %d, %d rows:\n%s", r.code, n, r.stdout)
	}
	// another tenant sees none of them
	if r := e.runAs(cliTokB, "ls", "-o", "json"); !strings.Contains(r.stdout, `"jobs": []`) {
		t.Fatalf("team-b's ls: %s", r.stdout)
	}

	r = e.run("get", a.ID)
	for _, want := range []string{"ID:", a.ID, "State:", "pending", "Workers:", "range 1..3", "Labels:", "team=alpha"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get: no %q in:\n%s", want, r.stdout)
		}
	}
	r = e.run("get", "-o", "json", a.ID)
	var got jobs.Job
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.ID != a.ID {
		t.Fatalf("get -o json: %v %s", err, r.stdout)
	}
}

func TestClientExitCodes(t *testing.T) {
	e := newCLIEnv(t)
	a := e.submit("codes")
	bad := specFile(t, map[string]any{"workers": map[string]int{"min": 3, "max": 1}})
	tests := []struct {
		name   string
		token  string
		args   []string
		code   int
		stderr []string
	}{
		{"unknown job", cliTokA, []string{"get", "j-doesnotexist"}, 1, []string{"404"}},
		{"another tenant's job", cliTokB, []string{"get", a.ID}, 1, []string{"404"}},
		{"bad token", "nope", []string{"ls"}, 1, []string{"401"}},
		{"invalid spec names the field", cliTokA, []string{"submit", bad}, 1, []string{"422", "workers"}},
		{"scale out of range", cliTokA, []string{"scale", a.ID, "9"}, 1, []string{"422"}},
		{"no ID", cliTokA, []string{"get"}, 2, []string{"usage: edl get ID"}},
		{"two IDs", cliTokA, []string{"cancel", a.ID, a.ID}, 2, []string{"want 1 argument"}},
		{"scale N not a number", cliTokA, []string{"scale", a.ID, "two"}, 2, []string{"N \"two\""}},
		{"bad -o", cliTokA, []string{"ls", "-o", "yaml"}, 2, []string{"table or json"}},
		{"bad --status", cliTokA, []string{"ls", "--status", "sleeping"}, 2, []string{"not a state"}},
		{"bad --label", cliTokA, []string{"ls", "--label", "x"}, 2, []string{"key=value"}},
		{"missing file", cliTokA, []string{"submit", "/nonexistent.json"}, 2, []string{"nonexistent"}},
		{"model without -o", cliTokA, []string{"model", a.ID}, 2, []string{"-o FILE"}},
		// a negative --step was read as "the newest" and downloaded it
		{"model negative --step", cliTokA, []string{"model", a.ID, "--step", "-5", "-o", os.DevNull}, 2, []string{"--step -5", "0 or more"}},
		{"bad job ID", cliTokA, []string{"get", "../cluster"}, 2, []string{"not a job ID"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.runAs(tc.token, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, tc.code, r.stderr)
			}
			for _, w := range tc.stderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr has no %q: %s", w, r.stderr)
				}
			}
		})
	}
	// the problem's title is printed, not only the status
	r := e.run("get", "j-doesnotexist")
	if !strings.Contains(r.stderr, "no such job") {
		t.Errorf("404's title missing: %s", r.stderr)
	}
	var out, errb bytes.Buffer
	code := runMain([]string{"ls", "--server", "http://127.0.0.1:1"}, &out, &errb)
	r = cliResult{code: code, stderr: errb.String()}
	if r.code != 1 || !strings.Contains(r.stderr, "connection refused") {
		t.Errorf("unreachable server: exit %d, %s", r.code, r.stderr)
	}
}

func TestClientScaleCancelEvents(t *testing.T) {
	e := newCLIEnv(t)
	a := e.submit("scaled")
	if r := e.run("scale", a.ID, "2"); r.code != 0 || !strings.Contains(r.stdout, "pinned to 2") {
		t.Fatalf("scale: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	j, err := e.store.Get(context.Background(), a.ID)
	if err != nil || j.Workers.Pinned != 2 {
		t.Fatalf("after scale: pinned %d, %v", j.Workers.Pinned, err)
	}
	if r := e.run("cancel", a.ID); r.code != 0 || !strings.Contains(r.stdout, "cancelling") {
		t.Fatalf("cancel: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	r := e.run("events", a.ID)
	for _, want := range []string{"submitted", "pinned to 2 workers", "pending -> cancelling"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("events: no %q in:\n%s", want, r.stdout)
		}
	}
	r = e.run("events", a.ID, "-o", "json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("events -o json: %d lines, want 3:\n%s", len(lines), r.stdout)
	}
	var ev jobs.Event
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil || ev.Type != jobs.EventScale {
		t.Fatalf("second event %s: %v", lines[1], err)
	}
	// a finished job cannot be cancelled again: 409 is an API error
	if _, err := e.store.Transition(context.Background(), a.ID, jobs.Cancelled, "workers gone"); err != nil {
		t.Fatal(err)
	}
	if r := e.run("cancel", a.ID); r.code != 1 || !strings.Contains(r.stderr, "409") {
		t.Fatalf("cancel a cancelled job: exit %d %s", r.code, r.stderr)
	}
	// -f returns once the job is over, with every event
	r = e.run("events", "-f", a.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "cancelling -> cancelled") {
		t.Fatalf("events -f of a finished job: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// drive plays the planner and the workers: start, grow, train, finish.
func drive(t *testing.T, store *jobstore.Store, id string, final jobs.State) {
	ctx := context.Background()
	step := func(f func() error) {
		if err := f(); err != nil {
			t.Errorf("drive %s: %v", id, err)
		}
		time.Sleep(150 * time.Millisecond)
	}
	step(func() error { _, err := store.Transition(ctx, id, jobs.Starting, "placed"); return err })
	step(func() error { return store.SetWorkers(ctx, id, 1, 1) })
	step(func() error { _, err := store.Transition(ctx, id, jobs.Running, "training"); return err })
	for i := int64(1); i <= 6; i++ {
		p := jobs.Progress{Epoch: int(i / 2), Step: i * 100, Samples: i * 60000, Loss: 2.0 / float64(i), SamplesPerS: 12000, WorldSize: 1}
		step(func() error { return store.SetProgress(ctx, id, p) })
		if i == 3 {
			step(func() error {
				_, err := store.AppendEvent(ctx, id, jobs.Event{Type: jobs.EventScale, Message: "grow: spare capacity", Data: map[string]any{"from": 1, "to": 2}})
				return err
			})
			step(func() error { return store.SetWorkers(ctx, id, 2, 2) })
		}
	}
	step(func() error { _, err := store.Transition(ctx, id, final, "done"); return err })
}

func TestClientWatch(t *testing.T) {
	tests := []struct {
		final jobs.State
		code  int
	}{
		{jobs.Succeeded, 0},
		{jobs.Failed, 3},
	}
	for _, tc := range tests {
		t.Run(string(tc.final), func(t *testing.T) {
			e := newCLIEnv(t)
			a := e.submit("watched")
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); drive(t, e.store, a.ID, tc.final) }()
			r := e.run("watch", a.ID)
			wg.Wait()
			if r.code != tc.code {
				t.Fatalf("watch: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, want := range []string{"pending -> starting", "grow: spare capacity", "starting -> running",
				"running -> " + string(tc.final), "workers 2/2", "loss 0.", "12.0k samples/s", a.ID + " " + string(tc.final) + " after"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("watch output has no %q:\n%s", want, r.stdout)
				}
			}
			// events come in order, each once
			if strings.Count(r.stdout, "grow: spare capacity") != 1 {
				t.Errorf("the resize event printed %d times", strings.Count(r.stdout, "grow: spare capacity"))
			}
			if i, k := strings.Index(r.stdout, "pending -> starting"), strings.Index(r.stdout, "grow: spare"); i > k {
				t.Errorf("events out of order:\n%s", r.stdout)
			}
		})
	}
}

func TestClientSubmitWatchJSON(t *testing.T) {
	e := newCLIEnv(t)
	spec := specFile(t, map[string]any{"name": "json-watch"})
	done := make(chan cliResult)
	go func() { done <- e.run("submit", spec, "--watch", "-o", "json") }()
	// find the job the submit made, then drive it
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		page, _, err := e.store.List(context.Background(), jobs.ListQuery{Tenant: "team-a"})
		if err == nil && len(page) == 1 {
			id = page[0].ID
		}
		time.Sleep(50 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("submit --watch made no job")
	}
	drive(t, e.store, id, jobs.Succeeded)
	r := <-done
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var sawProgress, sawEnd bool
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m struct {
			Progress *jobs.Job   `json:"progress"`
			Event    *jobs.Event `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		if m.Progress != nil && m.Progress.Progress.Step > 0 {
			sawProgress = true
		}
		if m.Event != nil && m.Event.Data["to"] == "succeeded" {
			sawEnd = true
		}
	}
	if !sawProgress || !sawEnd {
		t.Fatalf("progress %v, final event %v in:\n%s", sawProgress, sawEnd, r.stdout)
	}
}

func TestClientCheckpointsAndModel(t *testing.T) {
	e := newCLIEnv(t)
	a := e.submit("ck")
	e.ck.job = a.ID
	e.ck.models[100] = []byte("model at step 100")
	e.ck.models[200] = []byte("model at step 200, newer")

	r := e.run("checkpoints", a.ID)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[1], "200") {
		t.Fatalf("checkpoints: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = e.run("checkpoints", a.ID, "-o", "json")
	var cl api.CheckpointList
	if err := json.Unmarshal([]byte(r.stdout), &cl); err != nil || len(cl.Checkpoints) != 2 {
		t.Fatalf("checkpoints -o json: %v %s", err, r.stdout)
	}

	dir := t.TempDir()
	out := filepath.Join(dir, "m.edlm")
	if r := e.run("model", a.ID, "-o", out); r.code != 0 {
		t.Fatalf("model: exit %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "model at step 200, newer" {
		t.Fatalf("model (newest) wrote %q", b)
	}
	if r := e.run("model", a.ID, "--step", "100", "-o", out); r.code != 0 {
		t.Fatalf("model --step 100: exit %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "model at step 100" {
		t.Fatalf("model --step 100 wrote %q", b)
	}
	if r := e.run("model", a.ID, "--step", "150", "-o", out); r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Fatalf("model --step 150: exit %d %s", r.code, r.stderr)
	}
	// a body that does not match the manifest's SHA-256 is refused, and
	// the file already there is left as it was
	e.ck.badSum = true
	r = e.run("model", a.ID, "-o", out)
	if r.code != 1 || !strings.Contains(r.stderr, "SHA-256") {
		t.Fatalf("corrupted model: exit %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "model at step 100" {
		t.Fatalf("a corrupted download overwrote the file: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".edl-model-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestClientConfigFromEdlDev(t *testing.T) {
	e := newCLIEnv(t)
	a := e.submit("configured")
	var banner bytes.Buffer
	if err := writeDevClientConfig(&banner, e.url, cliTokA, "admin-token"); err != nil {
		t.Fatal(err)
	}
	p := os.Getenv("EDL_CONFIG")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("client config mode %v, want 0600", st.Mode().Perm())
	}
	if !strings.Contains(banner.String(), p) {
		t.Errorf("banner does not name the config: %s", banner.String())
	}
	// a plain `edl ls`: no flags, no environment
	var out, errb bytes.Buffer
	if code := runMain([]string{"ls"}, &out, &errb); code != 0 || !strings.Contains(out.String(), a.ID) {
		t.Fatalf("plain ls: exit %d\n%s%s", code, out.String(), errb.String())
	}
	// EDL_TOKEN wins over the file
	t.Setenv("EDL_TOKEN", cliTokB)
	out.Reset()
	if code := runMain([]string{"ls"}, &out, &errb); code != 0 || strings.Contains(out.String(), a.ID) {
		t.Fatalf("ls with EDL_TOKEN of team-b: exit %d\n%s", code, out.String())
	}
	// another --server does not get the config's token
	t.Setenv("EDL_TOKEN", "")
	errb.Reset()
	if code := runMain([]string{"ls", "--server", strings.Replace(e.url, "127.0.0.1", "localhost", 1)}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "401") {
		t.Fatalf("ls against another server name: exit %d %s", code, errb.String())
	}
	// the user's own file is never overwritten by edl dev
	own := []byte(`{"server":"https://edl.example.com","token":"mine"}`)
	if err := os.WriteFile(p, own, 0o600); err != nil {
		t.Fatal(err)
	}
	banner.Reset()
	if err := writeDevClientConfig(&banner, e.url, cliTokA, ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, own) {
		t.Fatalf("edl dev overwrote the user's config: %s", b)
	}
	if !regexp.MustCompile(`left alone`).MatchString(banner.String()) {
		t.Errorf("banner does not say the file was left alone: %s", banner.String())
	}
}

// An exec job whose program reports nothing read "epoch 1, step 0, 0
// samples (100%)" once it succeeded, an epoch it never told; it says that
// nothing was reported. A built-in job's progress reads as before.
func TestGetShowsUnreportedProgress(t *testing.T) {
	now := time.Now()
	ex := jobs.Job{ID: "j-1", State: jobs.Succeeded, CreatedAt: now, UpdatedAt: now,
		Spec: jobs.Spec{Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Command: []string{"/bin/true"}}}}}
	var b bytes.Buffer
	printJob(&b, terminal{}, ex, now)
	if !strings.Contains(b.String(), "none reported by the program") || strings.Contains(b.String(), "epoch 1") {
		t.Errorf("exec job without progress:\n%s", b.String())
	}
	bi := jobs.Job{ID: "j-2", State: jobs.Running, CreatedAt: now, UpdatedAt: now, Progress: jobs.Progress{Epoch: 1, Step: 40, Samples: 5120},
		Spec: jobs.Spec{Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{Epochs: 6}}}}
	b.Reset()
	printJob(&b, terminal{}, bi, now)
	if !strings.Contains(b.String(), "epoch 2/6, step 40, 5120 samples") {
		t.Errorf("built-in job:\n%s", b.String())
	}
}

// A program that writes only steps to $EDL_METRICS_FILE has its speed in
// steps/s (docs/exec.md); get and watch called it samples/s.
func TestRateUnitOfAStepsOnlyProgram(t *testing.T) {
	now := time.Now()
	spec := jobs.Spec{Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Command: []string{"python", "train.py"}}}}
	steps := jobs.Job{ID: "j-1", State: jobs.Running, CreatedAt: now, UpdatedAt: now, Spec: spec, Progress: jobs.Progress{Step: 120, SamplesPerS: 12}}
	samples := steps
	samples.Progress = jobs.Progress{Step: 130, Samples: 4160, SamplesPerS: 400}
	for _, c := range []struct {
		j          jobs.Job
		row, watch string
	}{
		{steps, "Steps/s:", "12 steps/s"},
		{samples, "Samples/s:", "400 samples/s"},
	} {
		var b bytes.Buffer
		printJob(&b, terminal{}, c.j, now)
		if !strings.Contains(b.String(), c.row) {
			t.Errorf("get of %+v: no %q row:\n%s", c.j.Progress, c.row, b.String())
		}
		if got := statusLine(c.j); !strings.Contains(got, c.watch) {
			t.Errorf("watch line of %+v: %q, want %q in it", c.j.Progress, got, c.watch)
		}
	}
}
