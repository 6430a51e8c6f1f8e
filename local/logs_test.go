package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestRotatingFileKeepsTheNewestParts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int64
		keep   int
		writes []string
		want   []string // path, path.1, path.2 ... contents; "" = absent
	}{
		{"no rotation", 10, 2, []string{"abc\n", "def\n"}, []string{"abc\ndef\n", ""}},
		{"one rotation", 8, 2, []string{"abc\n", "def\n", "ghi\n"}, []string{"ghi\n", "abc\ndef\n"}},
		{"oldest dropped", 4, 2, []string{"a1\n", "b2\n", "c3\n"}, []string{"c3\n", "b2\n", ""}},
		{"three kept", 4, 3, []string{"a1\n", "b2\n", "c3\n", "d4\n"}, []string{"d4\n", "c3\n", "b2\n", ""}},
		{"keep one truncates", 4, 1, []string{"a1\n", "b2\n"}, []string{"b2\n", ""}},
		{"long line cut", 4, 2, []string{"a\n", "0123456789\n", "b\n"}, []string{"b\n", "89\n", ""}},
		{"many lines in one write", 8, 3, []string{"a1\nb2\nc3\nd4\n"}, []string{"c3\nd4\n", "a1\nb2\n", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.stdout.log")
			r, err := openRotating(path, tc.max, tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.writes {
				if n, err := r.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("write %q: %d, %v", w, n, err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				p := path
				if i > 0 {
					p = fmt.Sprintf("%s.%d", path, i)
				}
				got, err := os.ReadFile(p)
				if want == "" {
					if !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("%s: exists (%q), want absent", filepath.Base(p), got)
					}
					continue
				}
				if err != nil || string(got) != want {
					t.Errorf("%s = %q (%v), want %q", filepath.Base(p), got, err, want)
				}
			}
		})
	}
}

func TestOpenRotatingRefusesBadLimits(t *testing.T) {
	dir := t.TempDir()
	if _, err := openRotating(filepath.Join(dir, "a"), 0, 2); err == nil {
		t.Error("max 0 accepted")
	}
	if _, err := openRotating(filepath.Join(dir, "b"), 10, 0); err == nil {
		t.Error("keep 0 accepted")
	}
}

func TestTailStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		n     int
		want  string
	}{
		{"all", []string{"a\nb\n", "c\n"}, 0, "a\nb\nc\n"},
		{"last line", []string{"a\nb\nc\n"}, 1, "c\n"},
		{"last two", []string{"a\nb\nc\n"}, 2, "b\nc\n"},
		{"unterminated last line counts", []string{"a\nb\nc"}, 2, "b\nc"},
		{"more than there is", []string{"a\nb\n"}, 10, "a\nb\n"},
		{"across a rotation", []string{"a\nb\n", "c\n"}, 2, "b\nc\n"},
		{"line split over files", []string{"a\nb", "c\nd\n"}, 2, "bc\nd\n"},
		{"empty current file", []string{"a\nb\n", ""}, 1, "b\n"},
		{"empty lines", []string{"\n\n\n"}, 2, "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var files []*os.File
			for i, content := range tc.files {
				p := filepath.Join(dir, fmt.Sprint(i))
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				f, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				files = append(files, f)
			}
			i, off, err := tailStart(files, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			got.WriteString(tc.files[i][off:])
			for _, c := range tc.files[i+1:] {
				got.WriteString(c)
			}
			if got.String() != tc.want {
				t.Errorf("tail %d of %q = %q, want %q", tc.n, tc.files, got.String(), tc.want)
			}
		})
	}
}

// printer writes 5 numbered lines to stdout and one to stderr, then waits
// for $CTL/go before 2 more stdout lines, and exits 3.
const printer = `for i in 1 2 3 4 5; do echo "out $i"; done
echo "err 1" >&2
while [ ! -f "$CTL/go" ]; do sleep 0.02; done
echo "out 6"; echo "out 7"
exit 3`

func newLogCluster(t *testing.T, script string, maxBytes int64) (*Cluster, string) {
	t.Helper()
	ctl := t.TempDir()
	c, err := New(Config{
		Command:      []string{"/bin/sh", "-c", script, "printer"},
		WorkerArgs:   func(jobs.Job, int, string) []string { return nil },
		Env:          []string{"CTL=" + ctl},
		LogDir:       t.TempDir(),
		LogMaxBytes:  maxBytes,
		Slots:        2,
		Grace:        2 * time.Second,
		RestartDelay: time.Hour, // a failed worker stays failed during the test
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c, ctl
}

func readLog(t *testing.T, c *Cluster, job, worker, stream string, tail int) string {
	t.Helper()
	rc, err := c.Logs(context.Background(), job, worker, stream, tail, false)
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

func waitLog(t *testing.T, c *Cluster, job, worker, stream, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rc, err := c.Logs(context.Background(), job, worker, stream, 0, false)
		if err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			if strings.Contains(string(b), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s of %s never showed %q", stream, worker, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWorkerLogsSplitTailAndFollow(t *testing.T) {
	c, ctl := newLogCluster(t, printer, 0)
	ctx := context.Background()
	if err := c.Scale(ctx, job("j1"), 1, "test"); err != nil {
		t.Fatal(err)
	}
	ws := waitWorkers(t, c, "j1", func(ws []jobs.Worker) bool { return len(ws) == 1 })
	id := ws[0].ID
	if ws[0].Started.IsZero() || ws[0].ExitCode != nil {
		t.Errorf("running worker: started %v exit code %v, want a time and nil", ws[0].Started, ws[0].ExitCode)
	}
	waitLog(t, c, "j1", id, "stderr", "err 1\n")
	waitLog(t, c, "j1", id, "stdout", "out 5\n")
	if got := readLog(t, c, "j1", id, "stdout", 0); got != "out 1\nout 2\nout 3\nout 4\nout 5\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := readLog(t, c, "j1", id, "stderr", 0); got != "err 1\n" {
		t.Errorf("stderr = %q: stdout and stderr must be kept apart", got)
	}
	if got := readLog(t, c, "j1", id, "stdout", 2); got != "out 4\nout 5\n" {
		t.Errorf("tail 2 = %q", got)
	}
	// Follow from the last line: it must deliver the lines written later
	// and end by itself once the worker has exited.
	rc, err := c.Logs(ctx, "j1", id, "stdout", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() { b, _ := io.ReadAll(rc); done <- string(b) }()
	select {
	case got := <-done:
		if got != "out 5\nout 6\nout 7\n" {
			t.Errorf("followed = %q, want out 5..7", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the worker exited")
	}
	ws = waitWorkers(t, c, "j1", func(ws []jobs.Worker) bool { return len(ws) == 1 && ws[0].State == jobs.WorkerFailed })
	if ws[0].ExitCode == nil || *ws[0].ExitCode != 3 {
		t.Errorf("exit code %v, want 3", ws[0].ExitCode)
	}
	if _, err := os.Stat(LogPath(c.cfg.LogDir, "j1", id, "stdout")); err != nil {
		t.Errorf("log file not at LogDir/<job>/<workerID>.stdout.log: %v", err)
	}
}

func TestWorkerLogsUnknownWorkerIsNotExist(t *testing.T) {
	c, _ := newLogCluster(t, printer, 0)
	for _, w := range []string{"nobody", "../j1", ".."} {
		_, err := c.Logs(context.Background(), "j1", w, "stdout", 0, false)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("worker %q: err %v, want fs.ErrNotExist", w, err)
		}
	}
	if _, err := c.Logs(context.Background(), "j1", "w", "both", 0, false); err == nil {
		t.Error("stream both accepted")
	}
}

// TestWorkerLogsFollowAcrossRotation writes more than a file holds while
// a reader follows: the reader must get every line once, in order.
func TestWorkerLogsFollowAcrossRotation(t *testing.T) {
	const script = `while [ ! -f "$CTL/go" ]; do sleep 0.02; done
i=0; while [ $i -lt 300 ]; do echo "line $i"; i=$((i+1)); done`
	c, ctl := newLogCluster(t, script, 256)
	ctx := context.Background()
	if err := c.Scale(ctx, job("j2"), 1, "test"); err != nil {
		t.Fatal(err)
	}
	ws := waitWorkers(t, c, "j2", func(ws []jobs.Worker) bool { return len(ws) == 1 })
	id := ws[0].ID
	rc, err := c.Logs(ctx, "j2", id, "stdout", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	r := rc.(*logReader)
	r.poll = time.Millisecond
	if err := os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() { b, _ := io.ReadAll(rc); done <- string(b) }()
	var got string
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end")
	}
	var want strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	// The reader may fall more than a rotation behind (then the parts in
	// between are gone); what it got must be in order and end with the end.
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if !strings.HasSuffix(want.String(), got) && !orderedSubset(lines, 300) {
		t.Fatalf("followed %d lines out of order: %q", len(lines), got)
	}
	if lines[len(lines)-1] != "line 299" {
		t.Errorf("last line %q, want line 299", lines[len(lines)-1])
	}
	// The files kept are the last two parts, at most 256 bytes each.
	all := readLog(t, c, "j2", id, "stdout", 0)
	if !strings.HasSuffix(want.String(), all) || len(all) > 2*256 || len(all) < 256 {
		t.Errorf("kept %d bytes %q: want the newest 256-512 bytes", len(all), all)
	}
}

// orderedSubset: each line is "line N" with N increasing.
func orderedSubset(lines []string, n int) bool {
	last := -1
	for _, l := range lines {
		var k int
		if _, err := fmt.Sscanf(l, "line %d", &k); err != nil || k <= last || k >= n {
			return false
		}
		last = k
	}
	return true
}
