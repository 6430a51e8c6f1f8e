package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// ErrBusy is Begin's answer while the previous checkpoint is still
// uploading: the new one is skipped, not queued.
var ErrBusy = errors.New("checkpoint skipped: previous one still uploading")

// EventKind says what happened to a background checkpoint.
type EventKind string

const (
	EventCommitted EventKind = "committed" // manifest stored
	EventSkipped   EventKind = "skipped"   // refused by Begin: one in flight
	EventRetry     EventKind = "retry"     // an attempt failed; will try again
	EventFailed    EventKind = "failed"    // gave up; the next checkpoint tries again
	EventPruneErr  EventKind = "prune_failed"
)

// Event is one thing the Uploader reports, for logs and the job's events.
type Event struct {
	Kind     EventKind
	Step     int64
	Attempt  int           // 1-based, for retry and failed
	Err      error         // for retry, failed, prune_failed
	Manifest *Manifest     // for committed
	Took     time.Duration // for committed and failed: since Submit
}

// UploaderConfig configures an Uploader; zero fields take the defaults.
type UploaderConfig struct {
	// MaxAttempts per checkpoint before it is given up; default 5.
	MaxAttempts int
	// Backoff is the wait before the first retry, doubling up to
	// MaxBackoff; defaults 500 ms and 10 s.
	Backoff, MaxBackoff time.Duration
	// NoPrune skips Catalog.Prune after each commit.
	NoPrune bool
	// OnEvent receives every event, on the uploading goroutine (or, for
	// skipped, on the caller of Begin); it must not block for long.
	OnEvent func(Event)
}

// Result is how the last finished background checkpoint ended.
type Result struct {
	Step     int64
	Manifest *Manifest // nil unless committed
	Err      error
}

// Uploader writes checkpoints in the background so training does not wait
// for storage. At a step boundary the caller takes a Snapshot with Begin,
// copies its state into the snapshot's buffers (reused from the last
// checkpoint, so no allocation after the first) and Submits it; Run uploads
// it. At most one checkpoint is in flight: Begin refuses while one is.
//
//	idle --Begin--> filling --Submit--> uploading --commit/give up--> idle
//	                   \--Abort--> idle
type Uploader struct {
	cat   *Catalog
	cfg   UploaderConfig
	queue chan *Snapshot

	mu      sync.Mutex
	busy    bool
	done    chan struct{} // closed when the current checkpoint ends
	bufs    map[string][]byte
	last    Result
	skipped int64
}

// NewUploader returns an Uploader writing to cat; start its Run.
func NewUploader(cat *Catalog, cfg UploaderConfig) *Uploader {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	return &Uploader{cat: cat, cfg: cfg, queue: make(chan *Snapshot, 1), bufs: map[string][]byte{}}
}

// Snapshot is a checkpoint being filled in memory.
type Snapshot struct {
	u         *Uploader
	meta      Meta
	names     []string
	data      map[string][]byte
	submitted time.Time
}

// Reserve allocates and touches a buffer ahead of the first checkpoint, so
// that the first snapshot's copy does not pay for page faults.
func (u *Uploader) Reserve(name string, size int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if cap(u.bufs[name]) >= size {
		return
	}
	b := make([]byte, size)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
	u.bufs[name] = b
}

// Begin starts a snapshot, or returns ErrBusy (and reports a skipped
// event) while the previous checkpoint is still uploading.
func (u *Uploader) Begin(meta Meta) (*Snapshot, error) {
	u.mu.Lock()
	if u.busy {
		u.skipped++
		u.mu.Unlock()
		u.emit(Event{Kind: EventSkipped, Step: meta.Step, Err: ErrBusy})
		return nil, ErrBusy
	}
	u.busy = true
	u.done = make(chan struct{})
	u.mu.Unlock()
	return &Snapshot{u: u, meta: meta, data: map[string][]byte{}}, nil
}

// Buffer returns a size-byte buffer for the named shard, to be filled
// before Submit. Its old contents are undefined.
func (s *Snapshot) Buffer(name string, size int) []byte {
	s.u.mu.Lock()
	b := s.u.bufs[name]
	if cap(b) < size {
		b = make([]byte, size)
		s.u.bufs[name] = b
	}
	s.u.mu.Unlock()
	b = b[:size]
	s.put(name, b)
	return b
}

// Add makes data the named shard; the snapshot owns it from now on.
func (s *Snapshot) Add(name string, data []byte) { s.put(name, data) }

// AddFloat32s copies v into the named shard as little-endian float32.
func (s *Snapshot) AddFloat32s(name string, v []float32) {
	PutFloat32s(s.Buffer(name, 4*len(v)), v)
}

func (s *Snapshot) put(name string, b []byte) {
	if _, dup := s.data[name]; !dup {
		s.names = append(s.names, name)
	}
	s.data[name] = b
}

// Submit hands the snapshot to the background upload and returns at once.
func (u *Uploader) Submit(s *Snapshot) {
	s.submitted = time.Now()
	u.queue <- s // never blocks: only one snapshot exists at a time
}

// Abort drops a snapshot that will not be submitted.
func (u *Uploader) Abort(s *Snapshot) {
	u.finish(Result{Step: s.meta.Step, Err: errors.New("aborted")})
}

// Busy reports whether a checkpoint is being filled or uploaded.
func (u *Uploader) Busy() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.busy
}

// Skipped is how many checkpoints Begin refused so far.
func (u *Uploader) Skipped() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.skipped
}

// Wait blocks until no checkpoint is in flight and returns how the last
// one ended (zero Result if none ever did).
func (u *Uploader) Wait(ctx context.Context) (Result, error) {
	u.mu.Lock()
	done := u.done
	u.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last, nil
}

// Run uploads submitted snapshots until ctx ends. A checkpoint in flight
// when ctx ends fails with ctx's error; for a last checkpoint on cancel,
// Wait for it before ending Run's context.
func (u *Uploader) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			select {
			case s := <-u.queue:
				u.finish(Result{Step: s.meta.Step, Err: ctx.Err()})
			default:
			}
			return ctx.Err()
		case s := <-u.queue:
			u.finish(u.upload(ctx, s))
		}
	}
}

func (u *Uploader) upload(ctx context.Context, s *Snapshot) Result {
	res := Result{Step: s.meta.Step}
	attempt := 0
	var last error
	// The wait doubles from Backoff to MaxBackoff, without jitter: one
	// uploader per job, nothing to spread out.
	b := &backoff.ExponentialBackOff{InitialInterval: u.cfg.Backoff, Multiplier: 2, MaxInterval: u.cfg.MaxBackoff}
	m, err := backoff.Retry(ctx, func() (*Manifest, error) {
		attempt++
		shards := make([]ShardSource, 0, len(s.names))
		for _, n := range s.names {
			shards = append(shards, ShardSource{Name: n, Size: int64(len(s.data[n])), Body: bytes.NewReader(s.data[n])})
		}
		m, err := u.cat.Write(ctx, s.meta, shards)
		last = err
		if errors.Is(err, ErrSuperseded) {
			return nil, backoff.Permanent(err) // no retry makes it newer
		}
		return m, err
	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(u.cfg.MaxAttempts)), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, _ time.Duration) {
			u.emit(Event{Kind: EventRetry, Step: s.meta.Step, Attempt: attempt, Err: err})
		}))
	if err != nil {
		if last == nil || ctx.Err() != nil && !errors.Is(last, ctx.Err()) {
			last = fmt.Errorf("%w (last error: %v)", err, last)
		}
		res.Err = fmt.Errorf("checkpoint step %d: gave up after %d attempts: %w", s.meta.Step, attempt, last)
		u.emit(Event{Kind: EventFailed, Step: s.meta.Step, Attempt: attempt, Err: last, Took: time.Since(s.submitted)})
		return res
	}
	res.Manifest = m
	u.emit(Event{Kind: EventCommitted, Step: s.meta.Step, Attempt: attempt, Manifest: m, Took: time.Since(s.submitted)})
	if !u.cfg.NoPrune {
		if _, perr := u.cat.Prune(ctx); perr != nil {
			u.emit(Event{Kind: EventPruneErr, Step: s.meta.Step, Err: perr})
		}
	}
	return res
}

func (u *Uploader) finish(r Result) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last = r
	u.busy = false
	if u.done != nil {
		close(u.done)
		u.done = nil
	}
}

func (u *Uploader) emit(e Event) {
	if u.cfg.OnEvent != nil {
		u.cfg.OnEvent(e)
	}
}

// Validate names the field at fault; zero values take the defaults.
func (c UploaderConfig) Validate() error {
	switch {
	case c.MaxAttempts < 0:
		return fmt.Errorf("uploader: MaxAttempts %d: must not be negative", c.MaxAttempts)
	case c.Backoff < 0 || c.MaxBackoff < 0:
		return fmt.Errorf("uploader: Backoff %s, MaxBackoff %s: must not be negative", c.Backoff, c.MaxBackoff)
	case c.MaxBackoff > 0 && c.MaxBackoff < c.Backoff:
		return fmt.Errorf("uploader: MaxBackoff %s: below Backoff %s", c.MaxBackoff, c.Backoff)
	}
	return nil
}
