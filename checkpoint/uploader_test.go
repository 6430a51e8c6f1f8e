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

// flakyStore is a Store whose Puts and Gets can be made to fail, and whose
// Puts can be held at a gate or observed, to stage faults.
type flakyStore struct {
	checkpoint.Store
	mu        sync.Mutex
	putFails  int  // fail this many more Puts
	getsFail  bool // fail every Get
	gate      chan struct{}
	onPut     func(key string)
	putsTried int
}

var errInjected = errors.New("injected store failure")

func (f *flakyStore) failGets(v bool) { f.mu.Lock(); f.getsFail = v; f.mu.Unlock() }

func (f *flakyStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	f.mu.Lock()
	f.putsTried++
	fail := f.putFails > 0
	if fail {
		f.putFails--
	}
	gate, hook := f.gate, f.onPut
	f.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	if gate != nil && strings.HasSuffix(key, "/params") {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errInjected
	}
	return f.Store.Put(ctx, key, r, size)
}

func (f *flakyStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	f.mu.Lock()
	fail := f.getsFail
	f.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return f.Store.Get(ctx, key)
}

// events collects what an Uploader reports.
type events struct {
	mu   sync.Mutex
	list []checkpoint.Event
}

func (e *events) add(ev checkpoint.Event) { e.mu.Lock(); e.list = append(e.list, ev); e.mu.Unlock() }
func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.list {
		out = append(out, string(ev.Kind))
	}
	return out
}

func startUploader(t *testing.T, c *checkpoint.Catalog, cfg checkpoint.UploaderConfig) (*checkpoint.Uploader, *events) {
	t.Helper()
	ev := &events{}
	cfg.OnEvent = ev.add
	u := checkpoint.NewUploader(c, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = u.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return u, ev
}

func snapshot(t *testing.T, u *checkpoint.Uploader, step int64, params []float32) error {
	t.Helper()
	s, err := u.Begin(checkpoint.Meta{Step: step, Epoch: 0, WorldSize: 1})
	if err != nil {
		return err
	}
	s.AddFloat32s(checkpoint.ShardParams, params)
	s.Add(checkpoint.ShardData, []byte(`{"offset":1}`))
	u.Submit(s)
	return nil
}

// hangGuard ends a little before the test binary's deadline, so that a
// wait that never ends fails with a message instead of a panic. It is no
// bound on how long anything may take.
func hangGuard(t *testing.T) context.Context {
	ctx := context.Background()
	cancel := context.CancelFunc(func() {})
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
	}
	t.Cleanup(cancel)
	return ctx
}

func wait(t *testing.T, u *checkpoint.Uploader) checkpoint.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := u.Wait(ctx)
	if err != nil {
		t.Fatalf("wait for upload: %v", err)
	}
	return r
}

func restoreParams(t *testing.T, c *checkpoint.Catalog, n int) ([]float32, *checkpoint.Manifest) {
	t.Helper()
	got := make([]float32, n)
	m, err := c.Restore(context.Background(), func(ctx context.Context, cp *checkpoint.Checkpoint) error {
		rc, err := cp.Open(ctx, checkpoint.ShardParams)
		if err != nil {
			return err
		}
		defer rc.Close()
		return checkpoint.ReadFloat32s(rc, got)
	}, nil)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	return got, m
}

func TestUploaderSkipsWhileBusyAndReusesBuffers(t *testing.T) {
	fs := &flakyStore{Store: backends()[0].open(t), gate: make(chan struct{})}
	c := newCatalog(t, fs, checkpoint.Config{})
	u, ev := startUploader(t, c, checkpoint.UploaderConfig{})
	params := []float32{1, 2, 3, 4}
	if err := snapshot(t, u, 1, params); err != nil {
		t.Fatal(err)
	}
	// The params shard is held at the gate: the upload is in flight.
	params[0] = 99 // training goes on; the snapshot must not see this
	if err := snapshot(t, u, 2, params); !errors.Is(err, checkpoint.ErrBusy) {
		t.Fatalf("Begin while uploading = %v, want ErrBusy", err)
	}
	if !u.Busy() || u.Skipped() != 1 {
		t.Errorf("Busy=%v Skipped=%d, want true and 1", u.Busy(), u.Skipped())
	}
	close(fs.gate)
	r := wait(t, u)
	if r.Err != nil || r.Step != 1 || r.Manifest == nil {
		t.Fatalf("result %+v, want step 1 committed", r)
	}
	got, m := restoreParams(t, c, 4)
	if m.Step != 1 || got[0] != 1 || got[3] != 4 {
		t.Errorf("restored step %d params %v, want step 1 with the values at snapshot time [1 2 3 4]", m.Step, got)
	}
	if want := "skipped committed"; strings.Join(ev.kinds(), " ") != want {
		t.Errorf("events %v, want %s", ev.kinds(), want)
	}

	// The next snapshot reuses the params buffer: no new allocation.
	s, err := u.Begin(checkpoint.Meta{Step: 3})
	if err != nil {
		t.Fatal(err)
	}
	b1 := s.Buffer(checkpoint.ShardParams, 16)
	u.Abort(s)
	s, _ = u.Begin(checkpoint.Meta{Step: 3})
	b2 := s.Buffer(checkpoint.ShardParams, 16)
	if &b1[0] != &b2[0] {
		t.Errorf("params buffer was reallocated between snapshots")
	}
	u.Abort(s)
}

func TestUploaderRetriesThenGivesUpThenRecovers(t *testing.T) {
	fs := &flakyStore{Store: backends()[0].open(t)}
	c := newCatalog(t, fs, checkpoint.Config{})
	u, ev := startUploader(t, c, checkpoint.UploaderConfig{MaxAttempts: 3, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})

	fs.mu.Lock()
	fs.putFails = 2
	fs.mu.Unlock()
	if err := snapshot(t, u, 10, []float32{1}); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, u); r.Err != nil || r.Manifest == nil {
		t.Fatalf("after 2 failures: %+v, want committed on the 3rd attempt", r)
	}
	if want := "retry retry committed"; strings.Join(ev.kinds(), " ") != want {
		t.Errorf("events %v, want %s", ev.kinds(), want)
	}

	fs.mu.Lock()
	fs.putFails = 1000 // the store is down
	fs.mu.Unlock()
	if err := snapshot(t, u, 20, []float32{2}); err != nil {
		t.Fatal(err)
	}
	r := wait(t, u)
	if r.Err == nil || !errors.Is(r.Err, errInjected) || r.Step != 20 {
		t.Fatalf("with the store down: %+v, want step 20 failed with the store's error", r)
	}
	kinds := ev.kinds()
	if got := strings.Join(kinds[len(kinds)-3:], " "); got != "retry retry failed" {
		t.Errorf("last events %v, want retry retry failed", kinds)
	}

	fs.mu.Lock()
	fs.putFails = 0 // back
	fs.mu.Unlock()
	if err := snapshot(t, u, 30, []float32{3}); err != nil {
		t.Fatalf("the next checkpoint after a failure was refused: %v", err)
	}
	if r := wait(t, u); r.Err != nil {
		t.Fatalf("after the store came back: %v", r.Err)
	}
	if got, m := restoreParams(t, c, 1); m.Step != 30 || got[0] != 3 {
		t.Errorf("restored step %d %v, want 30 [3]", m.Step, got)
	}
	if steps := listSteps(t, c); steps != "[10 30]" {
		t.Errorf("checkpoints %s, want [10 30]: the failed one left no manifest", steps)
	}
}

// TestStoreKilledMidUpload kills a real S3 server while the parameters are
// being uploaded: no manifest appears, training (the caller) is not
// blocked, and the next checkpoint succeeds once the server is back.
func TestStoreKilledMidUpload(t *testing.T) {
	t.Parallel()
	s3 := testenv.NewS3Server(t)
	killed := make(chan struct{})
	var once sync.Once
	fs := &flakyStore{Store: openS3(t, s3)}
	fs.onPut = func(key string) {
		if strings.HasSuffix(key, "/params") {
			once.Do(func() { s3.Server.Kill(); close(killed) })
		}
	}
	c := newCatalog(t, fs, checkpoint.Config{})
	u, ev := startUploader(t, c, checkpoint.UploaderConfig{MaxAttempts: 2, Backoff: 10 * time.Millisecond})

	params := make([]float32, 3<<20) // 12 MiB: a multipart upload
	for i := range params {
		params[i] = float32(i)
	}
	// The params upload is held at the gate (after the kill) until the
	// snapshot call has returned: the caller must not wait for its upload.
	gate := make(chan struct{})
	fs.mu.Lock()
	fs.gate = gate
	fs.mu.Unlock()
	snapped := make(chan error, 1)
	go func() { snapped <- snapshot(t, u, 100, params) }()
	select {
	case err := <-snapped:
		if err != nil {
			t.Fatal(err)
		}
	case <-hangGuard(t).Done():
		t.Fatal("taking the snapshot waited for its upload (held at the gate)")
	}
	<-killed
	close(gate)
	r := wait(t, u)
	if r.Err == nil {
		t.Fatalf("upload to a killed server succeeded: %+v", r)
	}
	fs.mu.Lock()
	fs.onPut, fs.gate = nil, nil
	fs.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := s3.Server.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if steps := listSteps(t, c); steps != "[]" {
		t.Fatalf("after the kill the job has checkpoints %s, want none", steps)
	}
	params[0] = -1
	if err := snapshot(t, u, 200, params); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, u); r.Err != nil {
		t.Fatalf("checkpoint after restart: %v (events %v)", r.Err, ev.kinds())
	}
	got, m := restoreParams(t, c, len(params))
	if m.Step != 200 || got[0] != -1 || got[len(got)-1] != float32(len(got)-1) {
		t.Errorf("restored step %d, params[0]=%v, want step 200 and -1", m.Step, got[0])
	}
	if !strings.Contains(strings.Join(ev.kinds(), " "), "failed") {
		t.Errorf("events %v, want a failed one for step 100", ev.kinds())
	}
}
