package checkpoint_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/minio/minio-go/v7"
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

// TestPruneAbortsIncompleteUploadsOfKilledWrites: a worker killed during
// an S3 multipart upload of a shard leaves the upload open; its parts hold
// storage, and List does not show it. Prune aborts those begun before the
// grace period and leaves a younger one (perhaps in flight) and another
// job's alone.
func TestPruneAbortsIncompleteUploadsOfKilledWrites(t *testing.T) {
	t.Parallel()
	s3 := testenv.NewS3(t)
	s := openS3(t, s3)
	clk := &clock{now: time.Now()}
	c := newCatalog(t, s, checkpoint.Config{Keep: 5, OrphanGrace: 10 * time.Minute, Now: clk.Now})
	write(t, c, checkpoint.Meta{Step: 1}, stateAt(1, 4096))
	ctx := context.Background()
	key := func(k string) string {
		if s3.Prefix == "" {
			return k
		}
		return s3.Prefix + "/" + k
	}
	core := minio.Core{Client: s3.Client}
	// What a Put killed after its first part leaves.
	open := func(k string) {
		id, err := core.NewMultipartUpload(ctx, s3.Bucket, key(k), minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := core.PutObjectPart(ctx, s3.Bucket, key(k), id, 1, bytes.NewReader(make([]byte, 5<<20)), 5<<20, minio.PutObjectPartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	killed := "job-1/shards/00000000000000000002-deadbeef0000/params"
	other := "job-10/shards/00000000000000000002-deadbeef0000/params"
	open(killed)
	open(other)
	uploads := func() map[string]bool {
		got := map[string]bool{}
		for u := range s3.Client.ListIncompleteUploads(ctx, s3.Bucket, key(""), true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			got[strings.TrimPrefix(strings.TrimPrefix(u.Key, s3.Prefix), "/")] = true
		}
		return got
	}
	if _, err := c.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if got := uploads(); !got[killed] || !got[other] {
		t.Fatalf("Prune inside the grace period aborted an upload perhaps in flight: open %v", got)
	}
	clk.Add(11 * time.Minute)
	res, err := c.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := uploads(); got[killed] || !got[other] {
		t.Errorf("after the grace period: open uploads %v, want only %s (another job's) (Prune %+v)", got, other, res)
	}
	var got state
	if m, err := c.Restore(ctx, loadAll(&got), nil); err != nil || m.Step != 1 {
		t.Errorf("restore after the sweep: %v", err)
	}
}
