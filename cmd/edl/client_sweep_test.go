package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/jobs/sweepstore"
)

func TestClientSweepVerbs(t *testing.T) {
	sws, run := sweepCLI(t)
	example := filepath.Join("..", "..", "examples", "sweep.json")

	res := run("sweep", "submit", example, "-o", "json")
	var sw sweep.Sweep
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &sw) != nil || len(sw.Trials) != 16 {
		t.Fatalf("submit: exit %d %q %s", res.code, res.stdout, res.stderr)
	}
	res = run("sweep", "get", sw.ID)
	if res.code != 0 || !strings.Contains(res.stdout, "TRIAL") || !strings.Contains(res.stdout, "lr=") || strings.Count(res.stdout, " pending ") != 16 {
		t.Fatalf("get: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res = run("sweep", "ls"); res.code != 0 || !strings.Contains(res.stdout, sw.ID) || !strings.Contains(res.stdout, "0/16") {
		t.Fatalf("ls: exit %d\n%s", res.code, res.stdout)
	}

	// watch ends with the sweep: 0 when it succeeded.
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = sws.Update(context.Background(), sw.ID, func(s *sweep.Sweep) ([]sweep.Event, error) {
			s.State = sweep.Succeeded
			s.Best = &sweep.Best{Trial: 3, Params: s.Trials[3].Params, Rung: 2, Metric: 0.5}
			return nil, nil
		})
	}()
	res = run("sweep", "watch", sw.ID, "--every", "100ms")
	if res.code != 0 || !strings.Contains(res.stdout, "best: trial 3") || !strings.Contains(res.stdout, "3*") {
		t.Fatalf("watch: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	other := run("sweep", "submit", example, "-o", "json")
	var o sweep.Sweep
	if err := json.Unmarshal([]byte(other.stdout), &o); err != nil {
		t.Fatal(err)
	}
	if res = run("sweep", "cancel", o.ID); res.code != 0 || !strings.Contains(res.stdout, "cancelling") {
		t.Fatalf("cancel: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
	if _, err := sws.Update(context.Background(), o.ID, func(s *sweep.Sweep) ([]sweep.Event, error) {
		s.State = sweep.Cancelled
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if res = run("sweep", "watch", o.ID, "-o", "json"); res.code != exitCancelled {
		t.Fatalf("watch of a cancelled sweep: exit %d", res.code)
	}
	if res = run("sweep", "cancel", o.ID); res.code != exitAPIError || !strings.Contains(res.stderr, "409") {
		t.Fatalf("cancel a finished sweep: exit %d %s", res.code, res.stderr)
	}
	for _, args := range [][]string{{"sweep"}, {"sweep", "frob"}, {"sweep", "get"}, {"sweep", "get", "a/b"}} {
		if res = run(args...); res.code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, res.code, exitUsage)
		}
	}
	if res = run("sweep", "get", "s-nope"); res.code != exitAPIError || !strings.Contains(res.stderr, "404") {
		t.Fatalf("get unknown: exit %d %s", res.code, res.stderr)
	}
}

// sweep submit --watch -o json writes JSON values, each a new version of the
// sweep: the answer to the POST is not written beside the watch's first line.
func TestClientSweepSubmitWatchJSON(t *testing.T) {
	sws, run := sweepCLI(t)
	go func() {
		for range 200 {
			time.Sleep(50 * time.Millisecond)
			page, _, err := sws.List(context.Background(), "team-a", 10, "")
			if err != nil || len(page) != 1 {
				continue
			}
			time.Sleep(300 * time.Millisecond)
			_, _ = sws.Update(context.Background(), page[0].ID, func(s *sweep.Sweep) ([]sweep.Event, error) {
				s.State = sweep.Succeeded
				return nil, nil
			})
			return
		}
	}()
	res := run("sweep", "submit", filepath.Join("..", "..", "examples", "sweep.json"), "--watch", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	seen := map[int64]bool{}
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	n := 0
	for ; dec.More(); n++ {
		var sw sweep.Sweep
		if err := dec.Decode(&sw); err != nil {
			t.Fatalf("value %d is not a sweep: %v", n, err)
		}
		if seen[sw.Version] {
			t.Fatalf("version %d written twice", sw.Version)
		}
		seen[sw.Version] = true
	}
	if n < 2 {
		t.Fatalf("want the submitted and the succeeded sweep, got %d values", n)
	}
}

// sweepCLI is an API server with a sweep store on a real Redis, and a run
// of the CLI against it as team-a.
func sweepCLI(t *testing.T) (*sweepstore.Store, func(args ...string) cliResult) {
	t.Helper()
	r := testenv.NewRedis(t)
	store := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix})
	sws := sweepstore.New(r.Client, sweepstore.Config{Prefix: r.Prefix})
	ts, err := jobs.NewTenants(jobs.Tenant{Name: "team-a", TokenSHA256: jobs.HashToken(cliTokA), RatePerS: 10000, Burst: 10000})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api.New(api.Config{Sweeps: sws}, store, ts, nil, nil).Handler())
	t.Cleanup(hs.Close)
	t.Setenv("EDL_CONFIG", filepath.Join(t.TempDir(), "edl", "config.json"))
	run := func(args ...string) cliResult {
		var out, errb bytes.Buffer
		code := runMain(append(args, "--server", hs.URL, "--token", cliTokA), &out, &errb)
		return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
	}
	return sws, run
}

// --idempotency-key reaches the server: a retried submit, job or sweep,
// gives back what the first made and says so.
func TestClientSubmitIdempotencyKey(t *testing.T) {
	e := newCLIEnv(t)
	spec := specFile(t, map[string]any{"name": "idem"})
	first := e.run("submit", spec, "--idempotency-key", "k-1", "-o", "json")
	var j jobs.Job
	if first.code != 0 || json.Unmarshal([]byte(first.stdout), &j) != nil {
		t.Fatalf("submit: exit %d %s%s", first.code, first.stdout, first.stderr)
	}
	again := e.run("submit", spec, "--idempotency-key", "k-1")
	if again.code != 0 || again.stdout != j.ID+" already submitted with this idempotency key (pending)\n" {
		t.Fatalf("retried submit: exit %d %q %s", again.code, again.stdout, again.stderr)
	}

	_, run := sweepCLI(t)
	example := filepath.Join("..", "..", "examples", "sweep.json")
	res := run("sweep", "submit", example, "--idempotency-key", "s-1", "-o", "json")
	var sw sweep.Sweep
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &sw) != nil {
		t.Fatalf("sweep submit: exit %d %s%s", res.code, res.stdout, res.stderr)
	}
	res = run("sweep", "submit", example, "--idempotency-key", "s-1")
	if res.code != 0 || !strings.HasPrefix(res.stdout, sw.ID+" already submitted with this idempotency key") {
		t.Fatalf("retried sweep submit: exit %d %q %s", res.code, res.stdout, res.stderr)
	}
}

// sweep submit checks --server (and the client config) before it reads
// the spec, as before submitVerb; submit reads the spec first. Each error
// that comes first is the one shown.
func TestClientSubmitErrorOrder(t *testing.T) {
	t.Setenv("EDL_CONFIG", filepath.Join(t.TempDir(), "edl", "config.json"))
	missing := filepath.Join(t.TempDir(), "missing.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "submit", missing, "--server", "ftp://x"}, `--server "ftp://x": must be an http:// or https:// URL`},
		{[]string{"submit", missing, "--server", "ftp://x"}, "submit: open " + missing},
	} {
		var out, errb bytes.Buffer
		code := runMain(tc.args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
