package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// fakeWorker behaves like `edl worker` towards its cluster: it runs until
// SIGTERM and exits 0, or exits with the code written to its control file.
// Once its SIGTERM trap is in place it creates ready.<index> (waitTrapped).
const fakeWorker = `trap 'exit 0' TERM
: > "$CTL/ready.$EDL_WORKER_INDEX"
while true; do
  if [ -f "$CTL/$EDL_WORKER_INDEX" ]; then c=$(cat "$CTL/$EDL_WORKER_INDEX"); rm -f "$CTL/$EDL_WORKER_INDEX"; exit $c; fi
  sleep 0.02
done`

// exitWith makes the fake worker of that index exit with code. The file
// appears whole (written aside, then renamed): the worker polls for it,
// and one written in place could be read empty (exit 0) before its
// content landed, as a loaded machine once showed.
func exitWith(t *testing.T, ctl string, index, code int) {
	t.Helper()
	tmp := filepath.Join(ctl, ".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(code)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(ctl, strconv.Itoa(index))); err != nil {
		t.Fatal(err)
	}
}

func newTestCluster(t *testing.T, slots int) (*Cluster, string) {
	t.Helper()
	ctl := t.TempDir()
	c, err := New(Config{
		Command:      []string{"/bin/sh", "-c", fakeWorker, "fake-worker"},
		WorkerArgs:   func(jobs.Job, int, string) []string { return nil },
		Env:          []string{"CTL=" + ctl},
		LogDir:       t.TempDir(),
		Slots:        slots,
		Grace:        2 * time.Second,
		RestartDelay: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c, ctl
}

func job(id string) jobs.Job {
	return jobs.Job{ID: id, Spec: jobs.Spec{Workers: jobs.WorkerRange{Min: 1, Max: 8}}}
}

// waitWorkers polls until the job's workers in state match want (index -> state).
func waitWorkers(t *testing.T, c *Cluster, jobID string, want func([]jobs.Worker) bool) []jobs.Worker {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ws, err := c.Workers(context.Background(), jobID)
		if err != nil {
			t.Fatal(err)
		}
		if want(ws) {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers of %s never matched; last: %+v", jobID, ws)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTrapped waits until the fake workers of the given indexes have
// installed their SIGTERM trap (each says so with a file).
func waitTrapped(t *testing.T, ctl string, indexes ...int) {
	t.Helper()
	guard := hangGuard(t)
	for _, i := range indexes {
		f := filepath.Join(ctl, "ready."+strconv.Itoa(i))
		for {
			if _, err := os.Stat(f); err == nil {
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			select {
			case <-guard.Done():
				t.Fatalf("fake worker %d never installed its trap", i)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// hangGuard ends a little before the test binary's deadline, so that a
// wait that never ends fails with a message; it bounds nothing else.
func hangGuard(t *testing.T) context.Context {
	ctx := context.Background()
	cancel := context.CancelFunc(func() {})
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
	}
	t.Cleanup(cancel)
	return ctx
}

func liveIndexes(ws []jobs.Worker) string {
	var s []string
	for _, w := range ws {
		if w.State == jobs.WorkerRunning {
			s = append(s, string(rune('0'+w.Index)))
		}
	}
	return strings.Join(s, ",")
}

func TestScaleOutAndInStopsHighestIndexes(t *testing.T) {
	c, ctl := newTestCluster(t, 8)
	ctx := context.Background()
	if err := c.Scale(ctx, job("a"), 3, "test"); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, c, "a", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1,2" })
	waitTrapped(t, ctl, 0, 1, 2) // a SIGTERM before the trap would kill the shell: exit code -1
	if err := c.Scale(ctx, job("a"), 1, "test"); err != nil {
		t.Fatal(err)
	}
	ws := waitWorkers(t, c, "a", func(ws []jobs.Worker) bool {
		for _, w := range ws {
			if w.State == jobs.WorkerStopping {
				return false
			}
		}
		return liveIndexes(ws) == "0"
	})
	for _, w := range ws {
		if w.Index > 0 && w.State != jobs.WorkerComplete {
			t.Errorf("worker %d state %s, want complete after graceful SIGTERM", w.Index, w.State)
		}
	}
	capa, _ := c.Capacity(ctx)
	if got := capa.Nodes[0].FreeCPUSlots; got != 7 {
		t.Errorf("free slots = %d, want 7", got)
	}
}

func TestCompletedWorkerNotReplacedFailedOneIs(t *testing.T) {
	c, ctl := newTestCluster(t, 8)
	ctx := context.Background()
	if err := c.Scale(ctx, job("b"), 2, "test"); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, c, "b", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1" })
	exitWith(t, ctl, 1, 0)
	waitWorkers(t, c, "b", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0" })
	time.Sleep(200 * time.Millisecond)
	if ws, _ := c.Workers(ctx, "b"); liveIndexes(ws) != "0" {
		t.Fatalf("a worker that exited 0 was replaced: %+v", ws)
	}
	exitWith(t, ctl, 0, 3)
	waitWorkers(t, c, "b", func(ws []jobs.Worker) bool {
		failed := 0
		for _, w := range ws {
			if w.State == jobs.WorkerFailed {
				failed++
			}
		}
		return failed == 1 && liveIndexes(ws) == "0"
	})
	// The next change of the count brings the completed index back.
	if err := c.Scale(ctx, job("b"), 3, "test"); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, c, "b", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1,2" })
}

func TestStopWorkerPlacesReplacementAtSameIndex(t *testing.T) {
	c, _ := newTestCluster(t, 8)
	ctx := context.Background()
	c.Scale(ctx, job("c"), 2, "test")
	ws := waitWorkers(t, c, "c", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1" })
	var victim jobs.Worker
	for _, w := range ws {
		if w.Index == 1 {
			victim = w
		}
	}
	if err := c.StopWorker(ctx, "c", victim.ID, "straggler"); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, c, "c", func(ws []jobs.Worker) bool {
		for _, w := range ws {
			if w.Index == 1 && w.ID != victim.ID && w.State == jobs.WorkerRunning {
				return true
			}
		}
		return false
	})
	if err := c.StopWorker(ctx, "c", "nope", ""); err == nil {
		t.Fatal("StopWorker of an unknown worker: want error")
	}
}

func TestSlotsBlockPlacementUntilFree(t *testing.T) {
	c, _ := newTestCluster(t, 2)
	ctx := context.Background()
	c.Scale(ctx, job("d"), 2, "test")
	c.Scale(ctx, job("e"), 1, "test")
	waitWorkers(t, c, "d", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1" })
	if ws, _ := c.Workers(ctx, "e"); len(ws) != 0 {
		t.Fatalf("job e placed beyond the slots: %+v", ws)
	}
	c.Scale(ctx, job("d"), 1, "test")
	waitWorkers(t, c, "e", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0" })
}

func TestTeardownAndCloseLeaveNoProcess(t *testing.T) {
	c, _ := newTestCluster(t, 8)
	ctx := context.Background()
	c.Scale(ctx, job("f"), 3, "test")
	waitWorkers(t, c, "f", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1,2" })
	var pids []int
	c.mu.Lock()
	for _, p := range c.jobs["f"].procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	c.mu.Unlock()
	if err := c.Teardown(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	// Gone, and listed as finished (logs_workers.go).
	waitWorkers(t, c, "f", func(ws []jobs.Worker) bool {
		return len(ws) == 3 && !slices.ContainsFunc(ws, func(w jobs.Worker) bool { return w.State.Live() })
	})
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("worker pid %d alive after teardown", pid)
		}
	}
	if err := c.Teardown(ctx, "f"); err != nil {
		t.Fatalf("second teardown: %v", err)
	}
}

func TestDiscoverGPUsWithoutNVMLSaysSo(t *testing.T) {
	gpus, err := DiscoverGPUs()
	if err == nil {
		t.Logf("NVML present: %d GPUs", len(gpus))
		return
	}
	if err != ErrNoNVML {
		t.Fatalf("DiscoverGPUs error = %v, want ErrNoNVML on a machine without the driver", err)
	}
}
