package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
)

// Worker log defaults: each stream keeps its current file and one rotated
// file of at most 16 MiB each.
const (
	DefaultLogMaxBytes = 16 << 20
	DefaultLogKeep     = 2
)

// LogPath is where the local cluster keeps one stream ("stdout" or
// "stderr") of a worker: <logDir>/<job>/<workerID>.<stream>.log; rotated
// parts are that path with ".1" (the newer) to ".<keep-1>" appended.
func LogPath(logDir, jobID, workerID, stream string) string {
	return filepath.Join(logDir, jobID, workerID+"."+stream+".log")
}

// rotatingFile is an io.Writer that appends to path and, when the next
// line would take it past max bytes, renames it to path.1 (path.1 to
// path.2, and so on, dropping the oldest so that keep files remain) and
// starts a new one. A line longer than max is cut.
type rotatingFile struct {
	mu   sync.Mutex
	path string
	max  int64
	keep int
	f    *os.File
	size int64
}

func openRotating(path string, max int64, keep int) (*rotatingFile, error) {
	if max <= 0 || keep < 1 {
		return nil, fmt.Errorf("log %s: max %d bytes, keep %d: want > 0 and >= 1", path, max, keep)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &rotatingFile{path: path, max: max, keep: keep, f: f, size: st.Size()}, nil
}

func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, os.ErrClosed
	}
	written := 0
	for len(p) > 0 {
		room := r.max - r.size
		chunk := p
		if int64(len(chunk)) > room {
			// Fill the file up to its last whole line; a line longer than a
			// file is cut.
			cut := 0
			if room > 0 {
				cut = bytes.LastIndexByte(p[:room], '\n') + 1
			}
			if cut == 0 && r.size > 0 {
				if err := r.rotate(); err != nil {
					return written, err
				}
				continue
			}
			if cut == 0 {
				cut = int(room)
			}
			chunk = p[:cut]
		}
		n, err := r.f.Write(chunk)
		r.size += int64(n)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// rotate shifts the parts and opens a new, empty file. Callers hold mu.
func (r *rotatingFile) rotate() error {
	if err := r.f.Close(); err != nil {
		return err
	}
	r.f = nil
	if r.keep == 1 {
		if err := os.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	} else {
		_ = os.Remove(r.path + "." + strconv.Itoa(r.keep-1))
		for i := r.keep - 2; i >= 1; i-- {
			from := r.path + "." + strconv.Itoa(i)
			if err := os.Rename(from, r.path+"."+strconv.Itoa(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		if err := os.Rename(r.path, r.path+".1"); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	r.f, r.size = f, 0
	return nil
}

func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// workerLogs opens a worker's two log streams.
func (c *Cluster) workerLogs(jobID, workerID string) (stdout, stderr *rotatingFile, err error) {
	if err := os.MkdirAll(filepath.Join(c.cfg.LogDir, jobID), 0o755); err != nil {
		return nil, nil, fmt.Errorf("worker log dir: %w", err)
	}
	if stdout, err = openRotating(LogPath(c.cfg.LogDir, jobID, workerID, "stdout"), c.cfg.LogMaxBytes, c.cfg.LogKeep); err != nil {
		return nil, nil, fmt.Errorf("worker stdout log: %w", err)
	}
	if stderr, err = openRotating(LogPath(c.cfg.LogDir, jobID, workerID, "stderr"), c.cfg.LogMaxBytes, c.cfg.LogKeep); err != nil {
		stdout.Close()
		return nil, nil, fmt.Errorf("worker stderr log: %w", err)
	}
	return stdout, stderr, nil
}

// logPoll is how often a followed log is checked for new output.
const logPoll = 100 * time.Millisecond

// Logs opens one stream ("stdout" or "stderr") of a worker's output as
// kept under LogDir (api.LogSource): the last tail lines (0: all kept,
// rotated parts included), then, with follow, what the worker writes until
// ctx ends or the worker has exited and all it wrote was read. A worker
// without such a log is an error wrapping fs.ErrNotExist.
func (c *Cluster) Logs(ctx context.Context, jobID, workerID, stream string, tail int, follow bool) (io.ReadCloser, error) {
	if stream != "stdout" && stream != "stderr" {
		return nil, fmt.Errorf("logs of %s: stream %q: want stdout or stderr", workerID, stream)
	}
	if !safeName(jobID) || !safeName(workerID) {
		return nil, fmt.Errorf("logs of %s/%s: %w", jobID, workerID, fs.ErrNotExist)
	}
	path := LogPath(c.cfg.LogDir, jobID, workerID, stream)
	cur, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("logs of %s/%s: %w", jobID, workerID, err)
	}
	// Oldest part first: path.<keep-1> ... path.1, then path itself.
	var files []*os.File
	for i := c.cfg.LogKeep - 1; i >= 1; i-- {
		if f, err := os.Open(path + "." + strconv.Itoa(i)); err == nil {
			files = append(files, f)
		}
	}
	files = append(files, cur)
	start, off, err := tailStart(files, tail)
	if err != nil {
		closeAll(files)
		return nil, fmt.Errorf("logs of %s/%s: %w", jobID, workerID, err)
	}
	closeAll(files[:start])
	files = files[start:]
	if _, err := files[0].Seek(off, io.SeekStart); err != nil {
		closeAll(files)
		return nil, fmt.Errorf("logs of %s/%s: %w", jobID, workerID, err)
	}
	r := &logReader{ctx: ctx, files: files, path: path, follow: follow, poll: logPoll,
		live: func() bool { return c.workerLive(jobID, workerID) }}
	return r, nil
}

func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`+"\x00")
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// workerLive reports whether the worker's process may still write.
func (c *Cluster) workerLive(jobID, workerID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	jr := c.jobs[jobID]
	if jr == nil {
		return false
	}
	p := jr.procs[workerID]
	return p != nil && p.state.Live()
}

// tailStart finds where the last n lines of the concatenated files begin:
// the index of the file and the offset in it (n 0: the very start). A last
// line without a newline counts as a line.
func tailStart(files []*os.File, n int) (int, int64, error) {
	if n <= 0 {
		return 0, 0, nil
	}
	buf := make([]byte, 32<<10)
	seen := 0
	first := true // the very last byte: a newline there ends the last line
	for i := len(files) - 1; i >= 0; i-- {
		st, err := files[i].Stat()
		if err != nil {
			return 0, 0, err
		}
		end := st.Size()
		for end > 0 {
			m := min(int64(len(buf)), end)
			if _, err := files[i].ReadAt(buf[:m], end-m); err != nil && !errors.Is(err, io.EOF) {
				return 0, 0, err
			}
			for j := m - 1; j >= 0; j-- {
				if buf[j] != '\n' {
					first = false
					continue
				}
				if first {
					first = false
					continue
				}
				seen++
				if seen == n {
					return i, end - m + j + 1, nil
				}
			}
			end -= m
		}
	}
	return 0, 0, nil
}

// logReader reads the files in turn and, with follow, waits at the end of
// the last for more until the worker is gone, following a rotation.
type logReader struct {
	ctx    context.Context
	files  []*os.File // still to read; the last is the live file
	path   string
	follow bool
	poll   time.Duration
	live   func() bool
	closed bool
}

func (r *logReader) Read(p []byte) (int, error) {
	for {
		if r.closed || len(r.files) == 0 {
			return 0, io.EOF
		}
		f := r.files[0]
		n, err := f.Read(p)
		if n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if len(r.files) > 1 {
			f.Close()
			r.files = r.files[1:]
			continue
		}
		if !r.follow {
			return 0, io.EOF
		}
		// At the end of the live file. Rotated? Then the new file follows.
		wasLive := r.live()
		if nf, err := os.Open(r.path); err == nil {
			a, aerr := f.Stat()
			b, berr := nf.Stat()
			if aerr == nil && berr == nil && !os.SameFile(a, b) {
				// Read what the old file got before the rotation first.
				if n, _ := f.Read(p); n > 0 {
					r.files = append(r.files, nf)
					return n, nil
				}
				f.Close()
				r.files = []*os.File{nf}
				continue
			}
			nf.Close()
		}
		if n, _ := f.Read(p); n > 0 {
			return n, nil
		}
		if !wasLive {
			return 0, io.EOF
		}
		if periodic.Sleep(r.ctx, r.poll) != nil {
			return 0, io.EOF
		}
	}
}

func (r *logReader) Close() error {
	r.closed = true
	closeAll(r.files)
	r.files = nil
	return nil
}

// closers closes each in turn and returns the first error.
type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
