package nomadx

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/hashicorp/nomad/api"
)

// tailChunk is the first guess of the bytes holding the last N lines;
// maxTailBytes bounds the search.
const (
	tailChunk    = 256
	maxTailBytes = 16 << 20
)

// Logs reads one stream ("stdout" or "stderr") of a worker's task, the
// allocation's task logs through the Nomad API (AllocFS().Logs, task
// "worker"), as api.LogSource: the last tail lines (0: from the start),
// then with follow what the task writes until it is dead or ctx ends. An
// allocation that is not the job's is an error wrapping fs.ErrNotExist.
func (c *Cluster) Logs(ctx context.Context, jobID, workerID, stream string, tail int, follow bool) (io.ReadCloser, error) {
	if stream != "stdout" && stream != "stderr" {
		return nil, fmt.Errorf("logs of %s: stream %q: want stdout or stderr", workerID, stream)
	}
	var alloc *api.Allocation
	err := c.do(ctx, "read", c.cfg.NomadJobID(jobID), func(ctx context.Context) error {
		a, _, err := c.client.Allocations().Info(workerID, c.q(ctx))
		if err != nil {
			if notFound(err) {
				return permanent(fmt.Errorf("allocation %s: %w", workerID, fs.ErrNotExist))
			}
			return err
		}
		alloc = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("logs of %s/%s: %w", jobID, workerID, err)
	}
	if alloc.JobID != c.cfg.NomadJobID(jobID) || alloc.TaskGroup != GroupName {
		return nil, fmt.Errorf("logs of %s/%s: not a worker of this job: %w", jobID, workerID, fs.ErrNotExist)
	}
	var head []byte
	origin, offset := "start", int64(0)
	if tail > 0 {
		// Nomad offsets count bytes, not lines: read ever larger ends of
		// the log until they hold tail lines (or the whole log), then
		// follow from the end of what was read.
		for n := int64(tail) * tailChunk; ; n *= 2 {
			n = min(n, maxTailBytes)
			data, end, err := c.readLog(ctx, alloc, stream, "end", n, false)
			if err != nil {
				return nil, fmt.Errorf("logs of %s/%s: %w", jobID, workerID, err)
			}
			head, offset = lastLines(data, tail), end
			if int64(len(data)) < n || n == maxTailBytes || bytes.Count(data, []byte{'\n'}) > tail {
				break
			}
		}
		if !follow {
			return io.NopCloser(bytes.NewReader(head)), nil
		}
	}
	fr, err := c.streamLog(ctx, alloc, stream, origin, offset, follow)
	if err != nil {
		return nil, fmt.Errorf("logs of %s/%s: %w", jobID, workerID, err)
	}
	if len(head) == 0 {
		return fr, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), fr), fr}, nil
}

// readLog reads a stream without following: its bytes from origin/offset
// and the file offset after them.
func (c *Cluster) readLog(ctx context.Context, alloc *api.Allocation, stream, origin string, offset int64, follow bool) ([]byte, int64, error) {
	cancel := make(chan struct{})
	defer close(cancel)
	frames, errc := c.client.AllocFS().Logs(alloc, follow, TaskName, stream, origin, offset, cancel, c.q(ctx))
	var buf bytes.Buffer
	var end int64
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return buf.Bytes(), end, nil
			}
			buf.Write(f.Data)
			end = f.Offset
		case err := <-errc:
			return nil, 0, err
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// streamLog opens a stream as a reader that ends with the stream (with
// follow: when the task is dead) or ctx.
func (c *Cluster) streamLog(ctx context.Context, alloc *api.Allocation, stream, origin string, offset int64, follow bool) (io.ReadCloser, error) {
	cancel := make(chan struct{})
	frames, errc := c.client.AllocFS().Logs(alloc, follow, TaskName, stream, origin, offset, cancel, c.q(ctx))
	if frames == nil { // the request itself failed
		close(cancel)
		return nil, <-errc
	}
	return api.NewFrameReader(frames, errc, cancel), nil
}

// lastLines returns the last n lines of data (a last line without a
// newline counts).
func lastLines(data []byte, n int) []byte {
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}
