package checkpoint_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
)

// TestS3ServerPausedMidUploadAndMidRestore stops a real S3 server with
// SIGSTOP (a hung host: its kernel still takes bytes, nothing answers)
// while a checkpoint uploads and again while one is being restored. Both
// must end in an error within a bound, not hang: the upload was given up
// (no manifest), the restore failed as a store error (no checkpoint
// skipped as corrupt, no silent start from scratch). Once the server
// resumes, a checkpoint commits and restores. Without a stall timeout the
// upload waited for the caller's context, the restore for ever.
func TestS3ServerPausedMidUploadAndMidRestore(t *testing.T) {
	t.Parallel()
	s3 := testenv.NewS3Server(t)
	t.Cleanup(s3.Server.Resume)
	opts := s3Options(s3)
	opts.StallTimeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := checkpoint.Open(ctx, s3.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	fs := &flakyStore{Store: st}
	fs.onPut = func(key string) {
		if strings.HasSuffix(key, "/params") {
			once.Do(s3.Server.Pause)
		}
	}
	c := newCatalog(t, fs, checkpoint.Config{})
	u, ev := startUploader(t, c, checkpoint.UploaderConfig{MaxAttempts: 2, Backoff: 10 * time.Millisecond})
	params := make([]float32, 3<<20) // 12 MiB: a multipart upload
	for i := range params {
		params[i] = float32(i)
	}
	if err := snapshot(t, u, 100, params); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wctx, wcancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer wcancel()
	r, err := u.Wait(wctx)
	if err != nil {
		t.Fatalf("upload to a paused server still in flight after %s (events %v)", time.Since(start), ev.kinds())
	}
	if r.Err == nil {
		t.Fatalf("upload to a paused server committed: %+v", r)
	}
	t.Logf("upload to the paused server failed after %s: %v", time.Since(start), r.Err)
	s3.Server.Resume()
	if steps := listSteps(t, c); steps != "[]" {
		t.Fatalf("after the failed upload the job has checkpoints %s, want none", steps)
	}
	fs.mu.Lock()
	fs.onPut = nil
	fs.mu.Unlock()
	params[0] = -1
	if err := snapshot(t, u, 200, params); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, u); r.Err != nil {
		t.Fatalf("checkpoint after resume: %v (events %v)", r.Err, ev.kinds())
	}

	// Paused after the restore has read the first MiB of the parameters.
	var skips []checkpoint.Skip
	done := make(chan error, 1)
	start = time.Now()
	go func() {
		_, err := c.Restore(context.Background(), func(ctx context.Context, cp *checkpoint.Checkpoint) error {
			rc, err := cp.Open(ctx, checkpoint.ShardParams)
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
				return err
			}
			s3.Server.Pause()
			_, err = io.Copy(io.Discard, rc)
			return err
		}, func(s checkpoint.Skip) { skips = append(skips, s) })
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, checkpoint.ErrNoCheckpoint) || len(skips) > 0 {
			t.Fatalf("restore from a paused server: %v, skipped %v; want a store error and no skip", err, skips)
		}
		t.Logf("restore from the paused server failed after %s: %v", time.Since(start), err)
	case <-time.After(90 * time.Second):
		s3.Server.Resume()
		t.Fatalf("restore from a paused server still running after 90 s")
	}
	s3.Server.Resume()
	got, m := restoreParams(t, c, len(params))
	if m.Step != 200 || got[0] != -1 {
		t.Errorf("restored step %d, params[0]=%v, want step 200 and -1", m.Step, got[0])
	}
}
