package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"
)

// Config configures a Catalog.
type Config struct {
	Job string // the job's id; one key segment
	// Keep is how many of the newest checkpoints Prune keeps; default 3.
	Keep int
	// KeepPerEpoch also keeps the newest checkpoint of every epoch.
	KeepPerEpoch bool
	// OrphanGrace is how old a shard no manifest names must be before
	// Prune deletes it; it must exceed the longest upload. Default 1 h.
	OrphanGrace time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	Log *slog.Logger // default slog.Default()
}

// Validate names the field at fault.
func (c Config) Validate() error {
	if err := checkName("Job", c.Job); err != nil {
		return err
	}
	if c.Keep < 0 {
		return fmt.Errorf("Keep: %d is negative", c.Keep)
	}
	if c.OrphanGrace < 0 {
		return fmt.Errorf("OrphanGrace: %s is negative", c.OrphanGrace)
	}
	return nil
}

// Catalog is one job's checkpoints in a Store.
type Catalog struct {
	store Store
	cfg   Config
	log   *slog.Logger
}

// NewCatalog checks cfg and fills its defaults.
func NewCatalog(store Store, cfg Config) (*Catalog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("checkpoint config: %w", err)
	}
	if cfg.Keep == 0 {
		cfg.Keep = 3
	}
	if cfg.OrphanGrace == 0 {
		cfg.OrphanGrace = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Catalog{store: store, cfg: cfg, log: cfg.Log.With("component", "checkpoint", "job", cfg.Job)}, nil
}

// Store is the store the catalog writes to.
func (c *Catalog) Store() Store { return c.store }

// ShardSource is one shard to write. Body is read once; when it is also an
// io.ReaderAt and Size is known (a bytes.Reader), its SHA-256 is computed
// alongside the upload instead of in line with it.
type ShardSource struct {
	Name string
	Size int64 // -1 when unknown
	Body io.Reader
}

// ErrSuperseded is Write's answer when a newer generation has already
// committed a checkpoint at the same step: the writer is stale, and its
// checkpoint is dropped rather than replacing that commit.
var ErrSuperseded = errors.New("checkpoint superseded by a newer generation's")

// Write stores the shards, then the manifest that commits them, and
// returns the manifest. Until the manifest is stored nothing of this
// checkpoint is visible to List or Restore; after a failed shard the
// shards written so far are deleted when the store allows, else left for
// Prune. A manifest of the same step and a newer Generation is never
// replaced: Write deletes its shards and returns ErrSuperseded.
func (c *Catalog) Write(ctx context.Context, meta Meta, shards []ShardSource) (*Manifest, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("checkpoint step %d: no shards", meta.Step)
	}
	if meta.Step < 0 {
		return nil, fmt.Errorf("checkpoint step %d: negative step", meta.Step)
	}
	m := &Manifest{FormatVersion: FormatVersion, Job: c.cfg.Job, Meta: meta}
	dir := shardDir(c.cfg.Job, meta.Step, nonce())
	seen := map[string]bool{}
	for _, s := range shards {
		if err := checkName("shard name", s.Name); err != nil {
			return nil, fmt.Errorf("checkpoint step %d: %w", meta.Step, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("checkpoint step %d: shard %q twice", meta.Step, s.Name)
		}
		seen[s.Name] = true
	}
	for _, s := range shards {
		info, err := c.putShard(ctx, dir+s.Name, s)
		if err != nil {
			c.discard(m.Shards)
			return nil, fmt.Errorf("checkpoint step %d: shard %s: %w", meta.Step, s.Name, err)
		}
		m.Shards = append(m.Shards, info)
	}
	key := manifestKey(c.cfg.Job, meta.Step)
	// A writer of an older generation (a leader that lost its lease and
	// finished a slow upload late) must not replace what a newer
	// generation committed at this step. Checked just before the manifest
	// goes in: the window left is one request long, not an upload's.
	if prev, err := c.Manifest(ctx, meta.Step); err == nil && prev.Generation > meta.Generation {
		c.discard(m.Shards)
		return nil, fmt.Errorf("checkpoint step %d: generation %d committed it already, this writer is of generation %d: %w",
			meta.Step, prev.Generation, meta.Generation, ErrSuperseded)
	} else if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt) {
		return nil, fmt.Errorf("checkpoint step %d: read the manifest it would replace: %w", meta.Step, err)
	}
	m.CreatedAt = c.cfg.Now().UTC()
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := c.store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		// The manifest may have landed even so (a lost response): keep the
		// shards; if it did not, Prune collects them as orphans.
		return nil, fmt.Errorf("checkpoint step %d: manifest: %w", meta.Step, err)
	}
	c.log.Info("checkpoint committed", "step", meta.Step, "epoch", meta.Epoch, "bytes", m.Size(), "store", c.store.String())
	return m, nil
}

func (c *Catalog) putShard(ctx context.Context, key string, s ShardSource) (ShardInfo, error) {
	info := ShardInfo{Name: s.Name, Key: key}
	if ra, ok := s.Body.(io.ReaderAt); ok && s.Size >= 0 {
		sum := make(chan string, 1)
		go func() { sum <- hashOf(io.NewSectionReader(ra, 0, s.Size)) }()
		err := c.store.Put(ctx, key, s.Body, s.Size)
		info.SHA256, info.Size = <-sum, s.Size
		return info, err
	}
	h := newPipeHasher()
	defer h.stop()
	cr := &countingReader{r: io.TeeReader(s.Body, h)}
	if err := c.store.Put(ctx, key, cr, s.Size); err != nil {
		return info, err
	}
	info.Size, info.SHA256 = cr.n, h.sum()
	return info, nil
}

// discard deletes a failed attempt's shards on a fresh context: the
// caller's may be what ended. Failures here are what Prune is for.
func (c *Catalog) discard(shards []ShardInfo) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range shards {
		if err := c.store.Delete(ctx, s.Key); err != nil {
			c.log.Debug("leaving shard of failed checkpoint for Prune", "key", s.Key, "err", err)
			return
		}
	}
}

func hashOf(r io.Reader) string {
	h := sha256.New()
	_, _ = io.CopyBuffer(h, r, make([]byte, 1<<20))
	return hex.EncodeToString(h.Sum(nil))
}

func nonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// steps lists the steps that have a manifest, newest first.
func (c *Catalog) steps(ctx context.Context) ([]int64, error) {
	objs, err := c.store.List(ctx, manifestPrefix(c.cfg.Job))
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, o := range objs {
		if step, ok := stepOfManifestKey(c.cfg.Job, o.Key); ok {
			out = append(out, step)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out, nil
}

// Manifest reads the manifest of the checkpoint at step; ErrNotFound if
// there is none, an error wrapping ErrCorrupt if it does not parse.
func (c *Catalog) Manifest(ctx context.Context, step int64) (*Manifest, error) {
	key := manifestKey(c.cfg.Job, step)
	rc, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	m, err := decodeManifest(c.cfg.Job, step, data)
	if err != nil {
		return nil, &CorruptError{Key: key, Reason: err.Error()}
	}
	return m, nil
}

// List returns the job's committed checkpoints, oldest first. Manifests
// that do not parse are left out (Restore reports them).
func (c *Catalog) List(ctx context.Context) ([]Manifest, error) {
	steps, err := c.steps(ctx)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", c.cfg.Job, err)
	}
	out := make([]Manifest, 0, len(steps))
	for i := len(steps) - 1; i >= 0; i-- {
		m, err := c.Manifest(ctx, steps[i])
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
			continue // pruned meanwhile, or broken
		}
		if err != nil {
			return nil, fmt.Errorf("list checkpoints of %s: %w", c.cfg.Job, err)
		}
		out = append(out, *m)
	}
	return out, nil
}

// OpenShard streams one shard of the checkpoint at step (for the API's
// model download). The reader's final Read fails with an error wrapping
// ErrCorrupt if the bytes do not match the manifest.
func (c *Catalog) OpenShard(ctx context.Context, step int64, name string) (io.ReadCloser, *Manifest, error) {
	m, err := c.Manifest(ctx, step)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s step %d: %w", c.cfg.Job, step, err)
	}
	info, ok := m.Shard(name)
	if !ok {
		return nil, nil, fmt.Errorf("checkpoint %s step %d: shard %q: %w", c.cfg.Job, step, name, ErrNotFound)
	}
	rc, err := c.openVerified(ctx, info)
	if errors.Is(err, ErrCorrupt) {
		// Prune deletes the manifest before the shards: a shard missing
		// under a manifest that has gone since is a checkpoint pruned
		// while we opened it, not a damaged one.
		if _, serr := c.store.Stat(ctx, manifestKey(c.cfg.Job, step)); errors.Is(serr, ErrNotFound) {
			return nil, nil, fmt.Errorf("checkpoint %s step %d: deleted by retention meanwhile: %w", c.cfg.Job, step, ErrNotFound)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s step %d: %w", c.cfg.Job, step, err)
	}
	return rc, m, nil
}

// List returns job's committed checkpoints in store, oldest first; for
// readers such as the API that serve many jobs.
func List(ctx context.Context, store Store, job string) ([]Manifest, error) {
	c, err := NewCatalog(store, Config{Job: job})
	if err != nil {
		return nil, err
	}
	return c.List(ctx)
}

// OpenModel streams the parameters shard of job's checkpoint at step: what
// GET /v1/jobs/{id}/checkpoints/{step}/model serves. The worker writes it in
// the trainer state format documented in worker/trainer (header "EDLM",
// layer widths, float32 parameters, CRC-32C).
func OpenModel(ctx context.Context, store Store, job string, step int64) (io.ReadCloser, *Manifest, error) {
	c, err := NewCatalog(store, Config{Job: job})
	if err != nil {
		return nil, nil, err
	}
	return c.OpenShard(ctx, step, ShardParams)
}
