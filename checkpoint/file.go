package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// tempPrefix marks a file Put has not yet renamed into place; List skips
// such files and checkKey refuses keys that would collide with them.
const tempPrefix = ".edl-tmp-"

// fileStore keeps each object as a file under root. Put writes a temporary
// file in the target directory, fsyncs it, renames it over the key and
// fsyncs the directory, so a crash leaves the old object or the new one.
type fileStore struct {
	root string
	url  string
}

func openFile(u *url.URL) (Store, error) {
	dir := u.Path
	if u.Host != "" && u.Host != "localhost" {
		dir = u.Host + u.Path // file://rel/dir: relative to the working directory
	}
	if dir == "" {
		return nil, fmt.Errorf("open store %s: no directory", redact(u.String()))
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open store %s: %w", redact(u.String()), err)
	}
	probe, err := os.CreateTemp(dir, tempPrefix+"probe-*")
	if err != nil {
		return nil, fmt.Errorf("open store %s: not writable: %w", redact(u.String()), err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return &fileStore{root: dir, url: "file://" + filepath.ToSlash(dir)}, nil
}

// NewFileStore returns a Store over an existing directory.
func NewFileStore(dir string) (Store, error) {
	return openFile(&url.URL{Scheme: "file", Path: dir})
}

func (s *fileStore) String() string { return s.url }

func (s *fileStore) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

func (s *fileStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	dst := s.path(key)
	// A concurrent Delete may remove the directory between MkdirAll and
	// CreateTemp (it prunes empty ones), so try twice.
	var f *os.File
	var err error
	for range 2 {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			continue
		}
		if f, err = os.CreateTemp(filepath.Dir(dst), tempPrefix+"*"); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var n int64
	if br, ok := r.(*bytes.Reader); ok {
		// In memory already: one write, no staging copy.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		if n, err = br.WriteTo(f); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
	} else {
		cr := &countingReader{r: &ctxReader{ctx: ctx, r: r}}
		if _, err := io.CopyBuffer(onlyWriter{f}, cr, make([]byte, 4<<20)); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		n = cr.n
	}
	if size >= 0 && n != size {
		return fmt.Errorf("put %s: read %d bytes, want %d", key, n, size)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	committed = true
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func (s *fileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return f, nil
}

func (s *fileStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(s.path(key))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.IsDir()) {
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, err)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

func (s *fileStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := s.walkFiles(ctx, prefix, func(_, key string, d fs.DirEntry) error {
		if strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walked
		}
		if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// walkFiles calls f with the path, key and entry of every file whose key
// starts with prefix, temporary ones included (a temporary folder is not
// walked). It walks only the folder the prefix names; the rest of the
// prefix filters names inside it.
func (s *fileStore) walkFiles(ctx context.Context, prefix string, f func(path, key string, d fs.DirEntry) error) error {
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = s.path(prefix[:i])
	}
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), tempPrefix) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			return f(p, key, d)
		}
		return nil
	})
}

func (s *fileStore) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	s.dropEmptyDirs(filepath.Dir(s.path(key)))
	return nil
}

// dropEmptyDirs removes dir and its parents while they are empty, up to
// the root, so listings stay short.
func (s *fileStore) dropEmptyDirs(dir string) {
	for ; dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
}

// sweepTemps deletes the temporary files under prefix last modified
// before cutoff: what a Put leaves when its process dies before the
// rename. List hides them, so nothing else ever would.
func (s *fileStore) sweepTemps(ctx context.Context, prefix string, cutoff time.Time) (int, error) {
	var stale []string
	err := s.walkFiles(ctx, prefix, func(p, _ string, d fs.DirEntry) error {
		if !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().Before(cutoff) {
			stale = append(stale, p)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep %q: %w", prefix, err)
	}
	n := 0
	for _, p := range stale {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("sweep %q: %w", prefix, err)
		}
		n++
		s.dropEmptyDirs(filepath.Dir(p))
	}
	return n, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// onlyWriter hides ReadFrom so io.CopyBuffer uses the given buffer and the
// reader's checks run on every chunk.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
