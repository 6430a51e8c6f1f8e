package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
)

// TestPruneNeverDeletesTheLastUsableCheckpoint: retention counts only
// checkpoints that can be restored towards Keep. With Keep 1 and the newest
// checkpoint broken (a manifest that does not parse, or a shard gone), the
// older one is the only thing a restore can use, and Prune must keep it.
func TestPruneNeverDeletesTheLastUsableCheckpoint(t *testing.T) {
	t.Parallel()
	breaks := []damage{
		{"newest manifest garbled", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
			key := fmt.Sprintf("%s/manifests/%020d.json", m.Job, m.Step)
			rewrite(t, s, key, func(b []byte) []byte { return b[:len(b)/2] })
		}},
		{"newest manifest of a newer format", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
			key := fmt.Sprintf("%s/manifests/%020d.json", m.Job, m.Step)
			rewrite(t, s, key, func(b []byte) []byte {
				return []byte(string(b[:len(`{"format_version": `)]) + "2" + string(b[len(`{"format_version": 1`):]))
			})
		}},
		{"newest params shard deleted", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
			if err := s.Delete(context.Background(), shardKey(t, m, checkpoint.ShardParams)); err != nil {
				t.Fatal(err)
			}
		}},
		{"newest optimizer shard truncated", func(t *testing.T, s checkpoint.Store, m *checkpoint.Manifest) {
			rewrite(t, s, shardKey(t, m, checkpoint.ShardOptimizer), func(b []byte) []byte { return b[:len(b)-1] })
		}},
	}
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			for _, d := range breaks {
				t.Run(d.name, func(t *testing.T) {
					ctx := context.Background()
					s := be.open(t)
					clk := &clock{now: time.Now()}
					c := newCatalog(t, s, checkpoint.Config{Keep: 1, Now: clk.Now})
					good := stateAt(10, 4096)
					write(t, c, checkpoint.Meta{Step: 10}, good)
					newest := write(t, c, checkpoint.Meta{Step: 20}, stateAt(20, 4096))
					d.do(t, s, newest)

					res, err := c.Prune(ctx)
					if err != nil {
						t.Fatal(err)
					}
					for _, step := range res.Deleted {
						if step == 10 {
							t.Errorf("Prune deleted step 10, the only checkpoint that verifies (deleted %v)", res.Deleted)
						}
					}
					// Long after the grace period, the broken newest one still
					// does not push the good one out, nor take its shards.
					clk.Add(2 * time.Hour)
					if _, err := c.Prune(ctx); err != nil {
						t.Fatal(err)
					}
					if objs, err := s.List(ctx, fmt.Sprintf("job-1/shards/%020d-", 20)); err != nil || len(objs) == 0 {
						t.Errorf("shards of the kept step 20: %d objects (%v), want them kept with its manifest", len(objs), err)
					}
					var got state
					m, err := c.Restore(ctx, loadAll(&got), nil)
					if err != nil {
						t.Fatalf("restore after Prune: %v", err)
					}
					if m.Step != 10 || string(got[checkpoint.ShardParams]) != string(good[checkpoint.ShardParams]) {
						t.Errorf("restored step %d, want step 10 with its params", m.Step)
					}

					// Once a newer usable checkpoint exists, Keep 1 lets both
					// older ones go.
					write(t, c, checkpoint.Meta{Step: 30}, stateAt(30, 4096))
					if _, err := c.Prune(ctx); err != nil {
						t.Fatal(err)
					}
					if got := listSteps(t, c); got != "[30]" {
						t.Errorf("after a newer good checkpoint: %s, want [30]", got)
					}
					if _, err := s.Stat(ctx, fmt.Sprintf("job-1/manifests/%020d.json", 20)); !errors.Is(err, checkpoint.ErrNotFound) {
						t.Errorf("broken manifest of step 20 still there (%v), want it pruned once older than the kept ones", err)
					}
				})
			}
		})
	}
}

// pruneOnGet runs hook once, right after the first Get of a key with the
// given suffix returns: a Prune landing between a reader's two requests.
type pruneOnGet struct {
	checkpoint.Store
	suffix string
	once   sync.Once
	hook   func()
}

func (p *pruneOnGet) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := p.Store.Get(ctx, key)
	if strings.HasSuffix(key, p.suffix) {
		p.once.Do(p.hook)
	}
	return rc, err
}

// TestOpenModelOfCheckpointPrunedMeanwhile: GET .../checkpoints/{step}/model
// of a checkpoint that retention deletes between the manifest read and the
// shard's is "no such checkpoint" (ErrNotFound, a 404), not a corrupt
// checkpoint (a 500 that sends an operator looking for damage).
func TestOpenModelOfCheckpointPrunedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			s := be.open(t)
			w := newCatalog(t, s, checkpoint.Config{Keep: 1})
			write(t, w, checkpoint.Meta{Step: 10}, stateAt(10, 4096))
			ps := &pruneOnGet{Store: s, suffix: fmt.Sprintf("/manifests/%020d.json", 10)}
			ps.hook = func() {
				write(t, w, checkpoint.Meta{Step: 20}, stateAt(20, 4096))
				if res, err := w.Prune(ctx); err != nil || len(res.Deleted) != 1 {
					t.Errorf("Prune = %+v, %v; want step 10 deleted", res, err)
				}
			}
			rc, _, err := checkpoint.OpenModel(ctx, ps, "job-1", 10)
			if err == nil {
				rc.Close()
				t.Fatal("OpenModel of a pruned checkpoint succeeded")
			}
			if !errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("OpenModel of a checkpoint pruned meanwhile = %v, want ErrNotFound, not ErrCorrupt", err)
			}
			// A shard really lost from a checkpoint that still exists stays corrupt.
			m, err := w.Manifest(ctx, 20)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, shardKey(t, m, checkpoint.ShardParams)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := checkpoint.OpenModel(ctx, s, "job-1", 20); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("OpenModel with the params shard lost = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestGetThenDeleteStillReads: a Get that succeeded hands over the object
// even if it is deleted before the first Read (a Prune between a reader's
// Get and its copy). Over S3 the lazy minio-go GetObject sent its GET only
// at the first Read, which then failed with a bare NoSuchKey.
func TestGetThenDeleteStillReads(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			s := be.open(t)
			want := randomBytes(3<<20, 7)
			if err := s.Put(ctx, "j/shards/a/params", bytes.NewReader(want), int64(len(want))); err != nil {
				t.Fatal(err)
			}
			rc, err := s.Get(ctx, "j/shards/a/params")
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if err := s.Delete(ctx, "j/shards/a/params"); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("read after delete: %d of %d bytes, %v; want the whole object", len(got), len(want), err)
			}
			if _, err := s.Get(ctx, "j/shards/a/params"); !errors.Is(err, checkpoint.ErrNotFound) {
				t.Errorf("Get after delete = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestStaleWriterCannotReplaceNewerGenerationsCommit: an old leader that
// lost its lease (generation 5) finishing a slow upload of step 100 after
// the new generation (6) committed its own step 100 must not replace that
// commit: the manifest is the new generation's, and its shards restore.
// The same generation (a retry after a lost response) and a newer one (a
// redo after the step's checkpoint was found corrupt) may still replace it.
func TestStaleWriterCannotReplaceNewerGenerationsCommit(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			s := be.open(t)
			c := newCatalog(t, s, checkpoint.Config{Keep: 3})
			newer := stateAt(100, 4096)
			write(t, c, checkpoint.Meta{Step: 100, Generation: 6}, newer)

			stale := stateAt(7, 4096)
			_, err := c.Write(ctx, checkpoint.Meta{Step: 100, Generation: 5}, []checkpoint.ShardSource{
				{Name: checkpoint.ShardParams, Size: int64(len(stale[checkpoint.ShardParams])), Body: bytes.NewReader(stale[checkpoint.ShardParams])},
			})
			if !errors.Is(err, checkpoint.ErrSuperseded) {
				t.Errorf("stale Write = %v, want ErrSuperseded", err)
			}
			var got state
			m, err := c.Restore(ctx, loadAll(&got), nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.Generation != 6 || !bytes.Equal(got[checkpoint.ShardParams], newer[checkpoint.ShardParams]) {
				t.Errorf("restored generation %d's step 100, want generation 6's", m.Generation)
			}
			if objs, _ := s.List(ctx, "job-1/shards/"); len(objs) != 3 {
				t.Errorf("%d shard objects, want the 3 of the commit (the refused write's deleted)", len(objs))
			}
			// The same generation again, and a newer one, replace it.
			write(t, c, checkpoint.Meta{Step: 100, Generation: 6}, newer)
			write(t, c, checkpoint.Meta{Step: 100, Generation: 7}, stateAt(100, 4096))
			if m, err := c.Manifest(ctx, 100); err != nil || m.Generation != 7 {
				t.Errorf("after a newer generation's write: %+v, %v", m, err)
			}
		})
	}
}

// TestUploaderGivesUpAtOnceWhenSuperseded: the Uploader does not retry a
// checkpoint a newer generation has already committed.
func TestUploaderGivesUpAtOnceWhenSuperseded(t *testing.T) {
	s := backends()[0].open(t)
	c := newCatalog(t, s, checkpoint.Config{})
	write(t, c, checkpoint.Meta{Step: 3, Generation: 2}, stateAt(3, 1024))
	u, ev := startUploader(t, c, checkpoint.UploaderConfig{Backoff: time.Millisecond, NoPrune: true})
	snap, err := u.Begin(checkpoint.Meta{Step: 3, Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	snap.Add(checkpoint.ShardParams, []byte("stale"))
	u.Submit(snap)
	res := wait(t, u)
	if !errors.Is(res.Err, checkpoint.ErrSuperseded) {
		t.Errorf("result %v, want ErrSuperseded", res.Err)
	}
	if got := strings.Join(ev.kinds(), " "); got != "failed" {
		t.Errorf("events %q, want a single failed (no retries)", got)
	}
}
