package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/local/redisproc"
)

// edl dev carried on without its child Redis when it died (every request
// 500). Now the child comes back on the same port with its data, and the
// API serves the job submitted before.
func TestDevRestartsItsRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Unavailable(t, "redis-server not installed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One slot and a job that needs two: nothing is placed, so no worker
	// process (this test binary) is started.
	logs := &testLog{}
	d, err := startDev(ctx, devConfig{listen: "127.0.0.1:0", dataDir: t.TempDir(), slots: 1, grace: 5 * time.Second,
		cooldown: time.Second, interval: 200 * time.Millisecond, workerLogLevel: "warn"}, newLogger(logs, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("edl dev's log, last lines:\n%s", logs.tail(40))
		}
	})
	spec := jobs.Spec{Name: "waits", Workers: jobs.WorkerRange{Min: 2, Max: 2},
		Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
			Model:   jobs.MLPModel{Hidden: []int{8}},
			Dataset: jobs.SyntheticDataset{Seed: 1, Samples: 100, Features: 4, Classes: 2, Partitions: 4},
			Epochs:  1, BatchSize: 10, LearningRate: 0.1}}}
	var created jobs.Job
	if err := d.api(ctx, "POST", "/v1/jobs", spec, &created); err != nil {
		t.Fatal(err)
	}
	addr, pid := d.redis.Addr(), d.redis.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for d.redis.Pid() == pid {
		select {
		case <-d.redis.Failed():
			t.Fatalf("supervisor gave up: %v", d.redis.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("child Redis not restarted within 30s")
		}
	}
	var got jobs.Job
	for {
		err := d.api(ctx, "GET", "/v1/jobs/"+created.ID, nil, &got)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "status 503") && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Logf("while Redis restarts: %v", err) // anything but 503 is worth seeing
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not served 30s after the child Redis was killed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got.ID != created.ID || got.Spec.Name != "waits" {
		t.Errorf("after the restart the job is %+v", got)
	}
	if d.redis.Addr() != addr || d.redis.Pid() == pid {
		t.Errorf("child Redis %s pid %d; want the same address %s and a new process (was %d)", d.redis.Addr(), d.redis.Pid(), addr, pid)
	}
	select {
	case <-d.redis.Failed():
		t.Fatalf("supervisor gave up: %v", d.redis.Err())
	default:
	}
}

// When the child cannot be kept up, edl dev stops with an error that says
// so, rather than serving on without its store.
func TestDevExitsWhenItsRedisStaysDown(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Unavailable(t, "redis-server not installed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := startDev(ctx, devConfig{listen: "127.0.0.1:0", dataDir: t.TempDir(), slots: 1, grace: 5 * time.Second,
		cooldown: time.Second, interval: 200 * time.Millisecond, workerLogLevel: "warn",
		redisSupervise: redisproc.SuperviseOptions{MaxRestarts: 1, Window: time.Minute}}, newLogger(io.Discard, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.wait(ctx) }()
	for kills := 0; kills < 2; kills++ {
		pid := d.redis.Pid()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for kills == 0 && d.redis.Pid() == pid { // the first death is restarted
			time.Sleep(20 * time.Millisecond)
		}
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "redis-server") || !strings.Contains(err.Error(), "does not serve without it") {
			t.Fatalf("edl dev ended with %v; want an error naming the redis-server", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("edl dev still running 30s after its Redis was given up")
	}
}

// testLog keeps what edl dev logs, for a failed test to show.
type testLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// tail is the last n lines written.
func (l *testLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(l.b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
