package restart

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/checkpoint"
)

func newTestSync(t *testing.T, store checkpoint.Store, dir string) *dirSync {
	t.Helper()
	cat, err := checkpoint.NewCatalog(store, checkpoint.Config{Job: "j", Keep: 2, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return newDirSync(cat, dir, slog.New(slog.DiscardHandler))
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, as the example script does.
	if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

func TestDirSyncRoundTrip(t *testing.T) {
	ctx := context.Background()
	store, err := checkpoint.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "checkpoint")
	up := newTestSync(t, store, src)
	if m, err := up.Upload(ctx, 1, 2); err != nil || m != nil {
		t.Fatalf("empty folder uploaded: %v %v", m, err)
	}
	writeFile(t, filepath.Join(src, "ckpt.pt"), "step 20")
	writeFile(t, filepath.Join(src, "sub dir", "extra.bin"), "aux")
	m, err := up.Upload(ctx, 1, 2)
	if err != nil || m == nil || m.Step != 0 || m.Generation != 1 {
		t.Fatalf("first upload: %+v, %v", m, err)
	}
	if _, ok := m.Shard("ckpt.pt"); !ok {
		t.Errorf("shard ckpt.pt missing from %+v", m.Shards)
	}
	if m, err := up.Upload(ctx, 1, 2); err != nil || m != nil {
		t.Fatalf("unchanged folder uploaded again: %+v %v", m, err)
	}
	writeFile(t, filepath.Join(src, "ckpt.pt"), "step 40")
	if m, err := up.Upload(ctx, 2, 2); err != nil || m == nil || m.Step != 1 {
		t.Fatalf("second upload: %+v, %v", m, err)
	}

	// Another worker's folder, holding a stale file, gets the newest.
	dst := filepath.Join(t.TempDir(), "checkpoint")
	writeFile(t, filepath.Join(dst, "stale.pt"), "old")
	down := newTestSync(t, store, dst)
	seq, err := down.Restore(ctx, nil)
	if err != nil || seq != 1 {
		t.Fatalf("restore: seq %d, %v", seq, err)
	}
	got := readTree(t, dst)
	if len(got) != 2 || got["ckpt.pt"] != "step 40" || got["sub dir/extra.bin"] != "aux" {
		t.Errorf("restored folder %v", got)
	}
	// Holding the newest already: nothing to do, and the next upload
	// from this folder continues the sequence.
	if seq, err := down.Restore(ctx, nil); err != nil || seq != 1 {
		t.Errorf("second restore: %d %v", seq, err)
	}
	writeFile(t, filepath.Join(dst, "ckpt.pt"), "step 60")
	if m, err := down.Upload(ctx, 3, 1); err != nil || m == nil || m.Step != 2 {
		t.Fatalf("upload after restore: %+v %v", m, err)
	}
}

func TestDirSyncSkipsCorruptNewest(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store, _ := checkpoint.NewFileStore(root)
	src := filepath.Join(t.TempDir(), "checkpoint")
	up := newTestSync(t, store, src)
	writeFile(t, filepath.Join(src, "ckpt.pt"), "good")
	if _, err := up.Upload(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "ckpt.pt"), "newer")
	m, err := up.Upload(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := m.Shard("ckpt.pt")
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(info.Key)), []byte("NEWER"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "checkpoint")
	var skipped []int64
	seq, err := newTestSync(t, store, dst).Restore(ctx, func(s checkpoint.Skip) { skipped = append(skipped, s.Step) })
	if err != nil || seq != 0 || len(skipped) != 1 || skipped[0] != 1 {
		t.Fatalf("restore: seq %d skipped %v err %v; want the older one after skipping 1", seq, skipped, err)
	}
	if got := readTree(t, dst)["ckpt.pt"]; got != "good" {
		t.Errorf("restored %q, want the verified older checkpoint", got)
	}
	if strings.Contains(strings.Join(mapKeys(readTree(t, filepath.Dir(dst))), ","), ".edl-restore") {
		t.Error("restore left its staging folder behind")
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A folder that holds checkpoint n is not rolled back to an older one when
// the store's newer ones do not verify.
func TestDirSyncKeepsNewerFolder(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store, _ := checkpoint.NewFileStore(root)
	cat, err := checkpoint.NewCatalog(store, checkpoint.Config{Job: "j", Keep: 10, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "checkpoint")
	up := newDirSync(cat, src, slog.New(slog.DiscardHandler))
	var ms []*checkpoint.Manifest
	for _, body := range []string{"zero", "one", "two", "three"} {
		writeFile(t, filepath.Join(src, "ckpt.pt"), body)
		m, err := up.Upload(ctx, 1, 1)
		if err != nil || m == nil {
			t.Fatalf("upload %s: %v", body, err)
		}
		ms = append(ms, m)
	}
	// Checkpoints 2 and 3 rot in the store; another worker's folder holds 2.
	for _, m := range ms[2:] {
		info, _ := m.Shard("ckpt.pt")
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(info.Key)), []byte("ROT!!"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "checkpoint")
	other := newDirSync(cat, dst, slog.New(slog.DiscardHandler))
	writeFile(t, filepath.Join(dst, "ckpt.pt"), "two")
	other.seq = 2
	seq, err := other.Restore(ctx, nil)
	if err != nil || seq != 2 {
		t.Fatalf("restore: seq %d, %v; want to keep 2", seq, err)
	}
	if got := readTree(t, dst)["ckpt.pt"]; got != "two" {
		t.Errorf("folder holds %q, want its own %q (not the older verified one)", got, "two")
	}
}
