package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
)

// TestPruneSweepsTempFilesOfKilledWrites: a worker killed (SIGKILL,
// preemption) while the file store writes a shard or a manifest leaves
// the temporary file Put writes before its rename. List hides such files,
// so Prune's orphan pass never saw them: every kill mid-upload leaked up
// to a shard's size on the shared disk, for ever. Prune now deletes those
// older than OrphanGrace, with their directories, and leaves a younger
// one (perhaps a write in flight) and the committed checkpoint alone.
func TestPruneSweepsTempFilesOfKilledWrites(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "store")
	s, err := checkpoint.Open(context.Background(), "file://"+root, checkpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	c := newCatalog(t, s, checkpoint.Config{Keep: 5, OrphanGrace: 10 * time.Minute, Now: clk.Now})
	write(t, c, checkpoint.Meta{Step: 1}, stateAt(1, 4096))
	// What Put leaves when its process dies before the rename.
	killed := []string{
		"job-1/shards/00000000000000000002-deadbeef0000/.edl-tmp-123456",
		"job-1/manifests/.edl-tmp-654321",
	}
	for _, k := range killed {
		p := filepath.Join(root, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := c.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range killed {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(k))); err != nil {
			t.Fatalf("Prune inside the grace period removed %s (a write perhaps in flight): %v", k, err)
		}
	}
	clk.Add(11 * time.Minute)
	res, err := c.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range killed {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(k))); err == nil {
			t.Errorf("temporary file of a killed write %s still there after the grace period (Prune %+v)", k, res)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "job-1/shards/00000000000000000002-deadbeef0000")); err == nil {
		t.Errorf("directory of the killed write still there")
	}
	var got state
	if m, err := c.Restore(ctx, loadAll(&got), nil); err != nil || m.Step != 1 {
		t.Errorf("restore after the sweep: %v", err)
	}
}
