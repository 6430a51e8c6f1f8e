package nomadx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/nomadx/nomadtest"
	"github.com/hashicorp/nomad/api"
)

// logJob places one worker of job j and returns its allocation ID.
func logJob(t *testing.T, e env, id string) string {
	t.Helper()
	if err := e.c.Scale(context.Background(), gpuJob(id, 0, nil), 1, "test"); err != nil {
		t.Fatal(err)
	}
	return waitAllocs(t, e, id, 1)[0].ID
}

// waitAllocs waits until Nomad placed n allocations of job (placement
// may come after the register's answer, as in Nomad).
func waitAllocs(t *testing.T, e env, job string, n int) []api.Allocation {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		allocs := e.srv.Allocations("default", e.cfg.NomadJobID(job))
		if len(allocs) == n {
			return allocs
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocations of %s: %d after 5s, want %d", job, len(allocs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readAll(t *testing.T, e env, job, alloc, stream string, tail int) string {
	t.Helper()
	rc, err := e.c.Logs(context.Background(), job, alloc, stream, tail, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLogsReadsTaskLogs(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	a := logJob(t, e, "j1")
	var out strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&out, "step %d loss 0.5\n", i)
	}
	e.srv.AppendLog(a, nomadx.TaskName, "stdout", []byte(out.String()))
	e.srv.AppendLog(a, nomadx.TaskName, "stderr", []byte("warning: slow\n"))
	if got := readAll(t, e, "j1", a, "stdout", 0); got != out.String() {
		t.Errorf("whole stdout: %d bytes, want %d", len(got), out.Len())
	}
	if got := readAll(t, e, "j1", a, "stderr", 0); got != "warning: slow\n" {
		t.Errorf("stderr = %q", got)
	}
	for _, n := range []int{1, 3, 50, 80} {
		lines := strings.SplitAfter(out.String(), "\n")
		lines = lines[:len(lines)-1]
		want := strings.Join(lines[max(0, len(lines)-n):], "")
		if got := readAll(t, e, "j1", a, "stdout", n); got != want {
			t.Errorf("tail %d = %q, want %q", n, got, want)
		}
	}
	// The reads go through the client fs endpoint, task "worker".
	reqs := requests(e.srv, "GET", "/v1/client/fs/logs/"+a)
	if len(reqs) == 0 || !strings.Contains(reqs[0].Query, "task=worker") {
		t.Errorf("log requests %+v", reqs)
	}
}

func TestLogsTailFindsLongLines(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	a := logJob(t, e, "j1")
	long := strings.Repeat("x", 3000)
	e.srv.AppendLog(a, nomadx.TaskName, "stdout", []byte("first\n"+long+"\n"+long+"\nlast\n"))
	got := readAll(t, e, "j1", a, "stdout", 3)
	if got != long+"\n"+long+"\nlast\n" {
		t.Errorf("tail 3 over lines longer than the first guess: %d bytes", len(got))
	}
}

func TestLogsFollowUntilTheTaskEnds(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	a := logJob(t, e, "j1")
	e.srv.AppendLog(a, nomadx.TaskName, "stdout", []byte("one\ntwo\n"))
	rc, err := e.c.Logs(context.Background(), "j1", a, "stdout", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(rc, buf, 4)
	if err != nil || string(buf[:n]) != "two\n" {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	e.srv.AppendLog(a, nomadx.TaskName, "stdout", []byte("three\n"))
	done := make(chan string)
	go func() { b, _ := io.ReadAll(rc); done <- string(b) }()
	time.Sleep(50 * time.Millisecond)
	if err := e.srv.MarkComplete(a); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got != "three\n" {
			t.Errorf("followed %q, want three", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end when the task completed")
	}
}

func TestLogsRefusesOtherJobsAllocations(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	a := logJob(t, e, "j1")
	logJob(t, e, "j2")
	ctx := context.Background()
	if _, err := e.c.Logs(ctx, "j2", a, "stdout", 0, false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("j1's allocation read as j2's: err %v, want fs.ErrNotExist", err)
	}
	if _, err := e.c.Logs(ctx, "j1", "00000000-0000-0000-0000-000000000000", "stdout", 0, false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("unknown allocation: err %v, want fs.ErrNotExist", err)
	}
	if _, err := e.c.Logs(ctx, "j1", a, "all", 0, false); err == nil {
		t.Error("stream all accepted")
	}
}

// A finished job keeps its workers and their logs as long as Nomad keeps
// its allocations (after a purge, until Nomad's garbage collection): the
// API lists them and serves their logs after the end.
func TestFinishedJobKeepsWorkersAndLogs(t *testing.T) {
	e := newEnv(t, nomadtest.Config{}, nil)
	ctx := context.Background()
	if err := e.c.Scale(ctx, gpuJob("j1", 0, nil), 2, "test"); err != nil {
		t.Fatal(err)
	}
	allocs := waitAllocs(t, e, "j1", 2)
	for _, a := range allocs {
		e.srv.AppendLog(a.ID, nomadx.TaskName, "stdout", []byte("from "+a.Name+"\n"))
	}
	if err := e.c.Teardown(ctx, "j1"); err != nil {
		t.Fatal(err)
	}
	for _, via := range []string{"the job's allocations", "the cluster-wide view"} {
		if via == "the cluster-wide view" {
			if _, err := e.c.Capacity(ctx); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			ws, err := e.c.Workers(ctx, "j1")
			if err != nil {
				t.Fatal(err)
			}
			done := len(ws) == 2
			for _, w := range ws {
				done = done && !w.State.Live() && !w.Queued
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("via %s: workers of the purged job %+v, want the 2 allocations, finished", via, ws)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, a := range allocs {
		if got := readAll(t, e, "j1", a.ID, "stdout", 0); got != "from "+a.Name+"\n" {
			t.Errorf("log of %s after the purge: %q", a.Name, got)
		}
	}
}
