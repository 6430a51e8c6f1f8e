package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PruneResult says what Prune removed.
type PruneResult struct {
	Deleted       []int64 // steps whose checkpoints were removed
	OrphanObjects int     // shard objects removed that no manifest named
}

// Prune applies retention: it keeps the newest Keep checkpoints and, with
// KeepPerEpoch, the newest of every epoch, and deletes the rest, manifest
// first so no manifest ever names a deleted shard. It then deletes shard
// objects that no remaining manifest names and that are older than
// OrphanGrace (the leftovers of writes that died before their manifest).
func (c *Catalog) Prune(ctx context.Context) (PruneResult, error) {
	var res PruneResult
	steps, err := c.steps(ctx)
	if err != nil {
		return res, fmt.Errorf("prune %s: %w", c.cfg.Job, err)
	}
	manifests := map[int64]*Manifest{} // nil value: unreadable manifest
	for _, step := range steps {
		m, err := c.Manifest(ctx, step)
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case errors.Is(err, ErrCorrupt):
			manifests[step] = nil
		case err != nil:
			return res, fmt.Errorf("prune %s: %w", c.cfg.Job, err)
		default:
			manifests[step] = m
		}
	}
	keep := c.keepSet(steps, manifests)
	referenced := map[string]bool{} // shard directories of kept manifests
	for _, step := range steps {
		m, ok := manifests[step]
		if !ok {
			continue
		}
		if keep[step] {
			if m != nil {
				for _, s := range m.Shards {
					referenced[dirOf(s.Key)] = true
				}
			}
			continue
		}
		if err := c.store.Delete(ctx, manifestKey(c.cfg.Job, step)); err != nil {
			return res, fmt.Errorf("prune %s: %w", c.cfg.Job, err)
		}
		res.Deleted = append(res.Deleted, step)
		// Its shards are now unreferenced; the orphan pass below takes them
		// at once, without waiting out the grace period.
		if m != nil {
			for _, s := range m.Shards {
				if err := c.store.Delete(ctx, s.Key); err != nil {
					return res, fmt.Errorf("prune %s: %w", c.cfg.Job, err)
				}
			}
		}
	}
	n, err := c.collectOrphans(ctx, referenced)
	res.OrphanObjects = n
	if err != nil {
		return res, fmt.Errorf("prune %s: %w", c.cfg.Job, err)
	}
	if len(res.Deleted) > 0 || n > 0 {
		c.log.Info("checkpoints pruned", "deleted_steps", res.Deleted, "orphan_objects", n)
	}
	return res, nil
}

// keepSet picks the steps to keep; steps are newest first.
func (c *Catalog) keepSet(steps []int64, manifests map[int64]*Manifest) map[int64]bool {
	keep := map[int64]bool{}
	kept := 0
	for _, step := range steps {
		if _, ok := manifests[step]; ok && kept < c.cfg.Keep {
			keep[step] = true
			kept++
		}
	}
	if c.cfg.KeepPerEpoch {
		newestOfEpoch := map[int]bool{}
		for _, step := range steps {
			m := manifests[step]
			if m != nil && !newestOfEpoch[m.Epoch] {
				newestOfEpoch[m.Epoch] = true
				keep[step] = true
			}
		}
	}
	return keep
}

// collectOrphans deletes shard directories no kept manifest names whose
// newest object is older than the grace period.
func (c *Catalog) collectOrphans(ctx context.Context, referenced map[string]bool) (int, error) {
	objs, err := c.store.List(ctx, shardPrefix(c.cfg.Job))
	if err != nil {
		return 0, err
	}
	newest := map[string]time.Time{}
	members := map[string][]string{}
	for _, o := range objs {
		d := dirOf(o.Key)
		if referenced[d] {
			continue
		}
		members[d] = append(members[d], o.Key)
		if o.Modified.After(newest[d]) {
			newest[d] = o.Modified
		}
	}
	cutoff := c.cfg.Now().Add(-c.cfg.OrphanGrace)
	n := 0
	for d, keys := range members {
		if newest[d].After(cutoff) {
			continue // perhaps a write still in flight
		}
		for _, k := range keys {
			if err := c.store.Delete(ctx, k); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

func dirOf(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[:i+1]
	}
	return ""
}
