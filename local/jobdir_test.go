package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// A job's folder (edl dev: its programs' exec folders, each with a copy of
// the job's checkpoint) is removed once the job is torn down and its
// workers are all gone; another job's stays while it runs.
func TestTeardownRemovesTheJobsFolder(t *testing.T) {
	c, _ := newTestCluster(t, 8)
	root := t.TempDir()
	c.mu.Lock()
	c.cfg.JobDir = func(jobID string) string { return filepath.Join(root, jobID) }
	c.mu.Unlock()
	for _, id := range []string{"f", "g"} {
		if err := os.MkdirAll(filepath.Join(root, id, id+"-w0", "checkpoint"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	c.Scale(ctx, job("f"), 2, "test")
	c.Scale(ctx, job("g"), 1, "test")
	waitWorkers(t, c, "f", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0,1" })
	waitWorkers(t, c, "g", func(ws []jobs.Worker) bool { return liveIndexes(ws) == "0" })
	if err := c.Teardown(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, c, "f", func(ws []jobs.Worker) bool {
		return !slices.ContainsFunc(ws, func(w jobs.Worker) bool { return w.State.Live() })
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(root, "f")); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the torn-down job's folder is still there")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(root, "g", "g-w0", "checkpoint")); err != nil {
		t.Errorf("the running job's folder: %v", err)
	}
}
