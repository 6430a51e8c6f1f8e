package restart

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/worker/core"
)

// dirIndexShard lists the files of an exec-mode checkpoint: the program's
// checkpoint folder, one shard per file, the manifest committed last.
const dirIndexShard = "edl-files.json"

// dirFile is one file of a checkpoint folder.
type dirFile struct {
	Shard string      `json:"shard"`
	Path  string      `json:"path"` // slash-separated, relative to the folder
	Mode  fs.FileMode `json:"mode"`
	Size  int64       `json:"size"`
}

var shardNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// dirSync moves an exec program's checkpoint folder (EDL_CHECKPOINT_DIR)
// to and from the job's checkpoint catalog. Checkpoint steps are a
// sequence per job (0, 1, 2, ...), not the program's own step numbers,
// which edl cannot know. One operation runs at a time.
type dirSync struct {
	cat *checkpoint.Catalog
	dir string
	log *slog.Logger

	mu  sync.Mutex
	seq int64  // newest checkpoint the folder holds (-1: none)
	fp  string // the folder's fingerprint when it last matched seq
}

func newDirSync(cat *checkpoint.Catalog, dir string, log *slog.Logger) *dirSync {
	return &dirSync{cat: cat, dir: dir, log: log, seq: -1}
}

// Seq is the newest checkpoint the folder holds (-1: none).
func (d *dirSync) Seq() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seq
}

// fingerprint lists the folder's regular files with sizes and times; it
// changes whenever the program writes a file. Empty for an empty folder.
func fingerprint(dir string) (string, []dirFile, error) {
	var files []dirFile
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // replaced meanwhile; the next look sees the new one
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		files = append(files, dirFile{Path: rel, Mode: info.Mode().Perm(), Size: info.Size()})
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\n", rel, info.Size(), info.ModTime().UnixNano(), ino(info))
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("read checkpoint folder %s: %w", dir, err)
	}
	if len(files) == 0 {
		return "", nil, nil
	}
	return hex.EncodeToString(h.Sum(nil)), files, nil
}

// Upload commits the folder as the job's next checkpoint when it changed
// since it was last uploaded or restored, and returns the new checkpoint
// (nil: nothing new). The files are first hard-linked aside, so a program
// that replaces its files (write, then rename) cannot change what is being
// uploaded; a folder that changed while being linked is left for the next
// call.
func (d *dirSync) Upload(ctx context.Context, gen int64, world int) (*checkpoint.Manifest, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fp, files, err := fingerprint(d.dir)
	if err != nil || fp == "" || fp == d.fp {
		return nil, err
	}
	snap := d.dir + ".edl-upload"
	_ = os.RemoveAll(snap)
	defer os.RemoveAll(snap)
	for _, f := range files {
		if err := linkOrCopy(filepath.Join(d.dir, filepath.FromSlash(f.Path)), filepath.Join(snap, filepath.FromSlash(f.Path))); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil // replaced while we looked: next time
			}
			return nil, fmt.Errorf("snapshot checkpoint folder: %w", err)
		}
	}
	if again, _, err := fingerprint(d.dir); err != nil || again != fp {
		return nil, err // still being written
	}
	names := map[string]bool{dirIndexShard: true}
	for i := range files {
		n := files[i].Path
		if !shardNameRE.MatchString(n) || names[n] || len(n) > 128 {
			n = fmt.Sprintf("file-%04d", i)
		}
		names[n] = true
		files[i].Shard = n
	}
	index, _ := json.Marshal(files)
	var shards []checkpoint.ShardSource
	var opened []*os.File
	defer func() {
		for _, f := range opened {
			f.Close()
		}
	}()
	for _, f := range files {
		fh, err := os.Open(filepath.Join(snap, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, fmt.Errorf("snapshot checkpoint folder: %w", err)
		}
		opened = append(opened, fh)
		st, err := fh.Stat()
		if err != nil {
			return nil, err
		}
		shards = append(shards, checkpoint.ShardSource{Name: f.Shard, Size: st.Size(), Body: fh})
	}
	shards = append(shards, checkpoint.ShardSource{Name: dirIndexShard, Size: int64(len(index)), Body: bytes.NewReader(index)})
	step := d.seq + 1
	if newest, err := d.newest(ctx); err == nil && newest >= step {
		step = newest + 1
	}
	m, err := d.cat.Write(ctx, checkpoint.Meta{Step: step, Generation: gen, WorldSize: world,
		Labels: map[string]string{"kind": "exec-dir", "files": strconv.Itoa(len(files))}}, shards)
	if err != nil {
		return nil, err
	}
	d.seq, d.fp = step, fp
	if _, err := d.cat.Prune(ctx); err != nil {
		d.log.Warn("checkpoint retention failed", "err", err)
	}
	return m, nil
}

// newest is the highest committed step in the catalog (-1: none).
func (d *dirSync) newest(ctx context.Context) (int64, error) {
	ms, err := d.cat.List(ctx)
	if err != nil {
		return -1, err
	}
	if len(ms) == 0 {
		return -1, nil
	}
	return ms[len(ms)-1].Step, nil
}

// Restore replaces the folder's content with the newest checkpoint that
// verifies, unless the folder already holds it or a newer one; it returns
// the step the folder holds afterwards (-1: none anywhere).
func (d *dirSync) Restore(ctx context.Context, onSkip func(checkpoint.Skip)) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	newest, err := d.newest(ctx)
	if err != nil {
		return d.seq, err
	}
	if newest <= d.seq {
		return d.seq, nil
	}
	stage := d.dir + ".edl-restore"
	m, err := d.cat.Restore(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		if cp.Manifest.Step <= d.seq {
			return errHoldNewer // the newer ones did not verify; ours is at least as new
		}
		_ = os.RemoveAll(stage)
		b, err := core.ReadShard(ctx, cp, dirIndexShard)
		if err != nil {
			return core.AsCorrupt(err)
		}
		var files []dirFile
		if err := json.Unmarshal(b, &files); err != nil {
			return fmt.Errorf("%w: %s: %v", checkpoint.ErrCorrupt, dirIndexShard, err)
		}
		for _, f := range files {
			if err := restoreFile(ctx, cp, stage, f); err != nil {
				return err
			}
		}
		return os.MkdirAll(stage, 0o755)
	}, onSkip)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) || errors.Is(err, errHoldNewer) {
		_ = os.RemoveAll(stage)
		return d.seq, nil
	}
	if err != nil {
		_ = os.RemoveAll(stage)
		return d.seq, err
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return d.seq, fmt.Errorf("restore checkpoint folder: %w", err)
	}
	if err := os.Rename(stage, d.dir); err != nil {
		return d.seq, fmt.Errorf("restore checkpoint folder: %w", err)
	}
	d.seq = m.Step
	d.fp, _, _ = fingerprint(d.dir)
	return d.seq, nil
}

// errHoldNewer stops a restore that would replace the folder with an
// older checkpoint than it holds.
var errHoldNewer = errors.New("the folder holds this checkpoint or a newer one")

func restoreFile(ctx context.Context, cp *checkpoint.Checkpoint, stage string, f dirFile) error {
	clean := filepath.Clean(filepath.FromSlash(f.Path))
	if !filepath.IsLocal(clean) {
		return fmt.Errorf("%w: file path %q leaves the folder", checkpoint.ErrCorrupt, f.Path)
	}
	dst := filepath.Join(stage, clean)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	rc, err := cp.Open(ctx, f.Shard)
	if err != nil {
		return core.AsCorrupt(err)
	}
	defer rc.Close()
	return core.WriteFileFrom(dst, f.Mode|0o200, rc)
}

func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return core.WriteFileFrom(dst, 0o666, in)
}

// ino is the file's inode: a file replaced by rename with the same size
// and time still changes the fingerprint.
func ino(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
