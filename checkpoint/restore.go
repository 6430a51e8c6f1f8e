package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

var (
	// ErrCorrupt marks a checkpoint whose manifest or shards do not match:
	// missing, truncated, or with a different SHA-256.
	ErrCorrupt = errors.New("checkpoint corrupt")
	// ErrNoCheckpoint is Restore's answer when no checkpoint verifies.
	ErrNoCheckpoint = errors.New("no usable checkpoint")
)

// CorruptError says which object failed verification and how.
type CorruptError struct {
	Key    string
	Reason string
}

func (e *CorruptError) Error() string { return fmt.Sprintf("%s: %s", e.Key, e.Reason) }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Skip is a checkpoint Restore passed over, for the job's event log.
type Skip struct {
	Step   int64
	Reason error // wraps ErrCorrupt
}

// Checkpoint is the candidate Restore hands to its load function.
type Checkpoint struct {
	Manifest *Manifest
	cat      *Catalog
	mu       sync.Mutex
	verified map[string]bool
}

// Open streams the named shard. The Read that would complete it (or
// return io.EOF) fails instead, returning no bytes, with an error wrapping
// ErrCorrupt if the bytes differ from the manifest, so a loader must not
// trust what it read before it saw io.EOF.
func (c *Checkpoint) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	info, ok := c.Manifest.Shard(name)
	if !ok {
		return nil, fmt.Errorf("shard %q: %w", name, ErrNotFound)
	}
	rc, err := c.cat.openVerified(ctx, info)
	if err != nil {
		return nil, err
	}
	vr := rc.(*verifyingReader)
	vr.onOK = func() {
		c.mu.Lock()
		c.verified[name] = true
		c.mu.Unlock()
	}
	return vr, nil
}

// LoadFunc reads a candidate checkpoint into the caller's state. Restore
// may call it for several candidates, newest first, until one loads and
// verifies, so it must build its result aside and let the caller adopt it
// only when Restore returns nil.
type LoadFunc func(ctx context.Context, cp *Checkpoint) error

// Restore loads the newest checkpoint whose shards all verify and returns
// its manifest. Each checkpoint passed over (its manifest unreadable, a
// shard missing, truncated or altered) is given to onSkip, which may be
// nil. A shard the load function did not read to the end is verified
// after it returns. Errors of the store itself (not corruption) stop the
// search and are returned, so a flaky store never silently rolls a job
// back; ErrNoCheckpoint means there was nothing usable. A candidate that
// retention deleted while it was read (a newer one was committed
// meanwhile) makes Restore list the checkpoints again and try the new ones.
func (c *Catalog) Restore(ctx context.Context, load LoadFunc, onSkip func(Skip)) (*Manifest, error) {
	tried := map[int64]bool{}
	// A candidate deleted by retention while we read it means a newer
	// checkpoint was committed meanwhile (Prune runs after a commit): list
	// again rather than answer ErrNoCheckpoint, which starts the job over.
	for round := 0; ; round++ {
		steps, err := c.steps(ctx)
		if err != nil {
			return nil, fmt.Errorf("restore %s: %w", c.cfg.Job, err)
		}
		pruned := false
		for _, step := range steps {
			if tried[step] {
				continue
			}
			tried[step] = true
			m, err := c.try(ctx, step, load)
			if err == nil {
				c.log.Info("checkpoint restored", "step", m.Step, "epoch", m.Epoch, "bytes", m.Size())
				return m, nil
			}
			if !errors.Is(err, ErrCorrupt) {
				return nil, fmt.Errorf("restore %s step %d: %w", c.cfg.Job, step, err)
			}
			if _, serr := c.store.Stat(ctx, manifestKey(c.cfg.Job, step)); errors.Is(serr, ErrNotFound) {
				pruned = true
				err = fmt.Errorf("deleted by retention meanwhile: %w", err)
			}
			c.log.Warn("checkpoint skipped", "step", step, "reason", err.Error())
			if onSkip != nil {
				onSkip(Skip{Step: step, Reason: err})
			}
		}
		if !pruned || round == maxRestoreRounds-1 {
			break
		}
	}
	return nil, fmt.Errorf("restore %s: %w (%d checkpoints looked at)", c.cfg.Job, ErrNoCheckpoint, len(tried))
}

// maxRestoreRounds bounds Restore's listings when retention keeps deleting
// what it reads.
const maxRestoreRounds = 5

// try loads one candidate; an ErrCorrupt error means skip it.
func (c *Catalog) try(ctx context.Context, step int64, load LoadFunc) (*Manifest, error) {
	m, err := c.Manifest(ctx, step)
	if errors.Is(err, ErrNotFound) {
		// Pruned since we listed: not corrupt, but not there either.
		return nil, &CorruptError{Key: manifestKey(c.cfg.Job, step), Reason: "manifest vanished"}
	}
	if err != nil {
		return nil, err
	}
	// Cheap checks first, so a deleted or truncated shard costs no download.
	for _, s := range m.Shards {
		st, err := c.store.Stat(ctx, s.Key)
		if errors.Is(err, ErrNotFound) {
			return nil, &CorruptError{Key: s.Key, Reason: "shard missing"}
		}
		if err != nil {
			return nil, err
		}
		if st.Size != s.Size {
			return nil, &CorruptError{Key: s.Key, Reason: fmt.Sprintf("shard is %d bytes, manifest says %d", st.Size, s.Size)}
		}
	}
	cp := &Checkpoint{Manifest: m, cat: c, verified: map[string]bool{}}
	loadErr := load(ctx, cp)
	if errors.Is(loadErr, ErrCorrupt) {
		return nil, loadErr
	}
	// Verify what the loader did not read to the end. After a load error
	// this tells corruption (skip) from the loader's own failure (return).
	for _, s := range m.Shards {
		cp.mu.Lock()
		done := cp.verified[s.Name]
		cp.mu.Unlock()
		if done {
			continue
		}
		if err := c.verify(ctx, s); err != nil {
			return nil, err
		}
	}
	if loadErr != nil {
		return nil, fmt.Errorf("load: %w", loadErr)
	}
	return m, nil
}

// verify reads a whole shard and checks it against its record.
func (c *Catalog) verify(ctx context.Context, s ShardInfo) error {
	rc, err := c.openVerified(ctx, s)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.CopyBuffer(io.Discard, rc, make([]byte, 1<<20))
	return err
}

func (c *Catalog) openVerified(ctx context.Context, s ShardInfo) (io.ReadCloser, error) {
	rc, err := c.store.Get(ctx, s.Key)
	if errors.Is(err, ErrNotFound) {
		return nil, &CorruptError{Key: s.Key, Reason: "shard missing"}
	}
	if err != nil {
		return nil, err
	}
	return &verifyingReader{rc: rc, info: s, h: newPipeHasher()}, nil
}

// verifyingReader hashes what passes through and fails the read that
// would complete the shard if size or SHA-256 differ from the manifest.
// That read returns no bytes: a caller that copies the stream on (the
// API's model download) ends it short instead of handing out every byte
// of a shard that does not verify.
type verifyingReader struct {
	rc     io.ReadCloser
	info   ShardInfo
	h      *pipeHasher
	n      int64
	summed bool // the hash of info.Size bytes matched
	err    error
	onOK   func()
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	if v.n+int64(n) > v.info.Size {
		v.err = &CorruptError{Key: v.info.Key, Reason: fmt.Sprintf("shard longer than the %d bytes the manifest says", v.info.Size)}
		return 0, v.err
	}
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.n == v.info.Size && !v.summed {
		if got := v.h.sum(); got != v.info.SHA256 {
			v.err = &CorruptError{Key: v.info.Key, Reason: fmt.Sprintf("shard sha256 %s, manifest says %s", got, v.info.SHA256)}
			return 0, v.err
		}
		v.summed = true
	}
	if err == io.EOF {
		if v.n != v.info.Size {
			v.err = &CorruptError{Key: v.info.Key, Reason: fmt.Sprintf("shard truncated: %d of %d bytes", v.n, v.info.Size)}
			return 0, v.err
		}
		v.err = io.EOF
		if v.onOK != nil {
			v.onOK()
		}
		return n, v.err
	}
	return n, err
}

func (v *verifyingReader) Close() error {
	v.h.stop()
	return v.rc.Close()
}
