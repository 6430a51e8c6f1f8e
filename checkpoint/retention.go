package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PruneResult says what Prune removed.
type PruneResult struct {
	Deleted       []int64 // steps whose checkpoints were removed
	OrphanObjects int     // shard objects removed that no manifest named, and unfinished writes of killed Puts
}

// Prune applies retention: it keeps the newest Keep checkpoints and, with
// KeepPerEpoch, the newest of every epoch, and deletes the rest, manifest
// first so no manifest ever names a deleted shard. Only usable checkpoints
// count towards Keep: a manifest that parses and whose shards are all
// there at their recorded sizes (a Stat each, no download). A broken one
// newer than the Keep-th usable one is kept but not counted, so a damaged
// or unreadable newest checkpoint (a manifest of a newer format, a shard
// lost) never pushes out the last one a restore can use. It then deletes
// shard objects that no remaining manifest names and that are older than
// OrphanGrace (the leftovers of writes that died before their manifest),
// and the unfinished writes as old of a Put killed midway (the file
// store's temporary files, an S3 store's incomplete multipart uploads);
// the shards of a kept manifest that does not parse are left alone.
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
	keep, err := c.keepSet(ctx, steps, manifests)
	if err != nil {
		return res, fmt.Errorf("prune %s: %w", c.cfg.Job, err)
	}
	referenced := map[string]bool{} // shard directories of kept manifests
	unreadable := map[int64]bool{}  // kept steps whose manifest does not parse
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
			} else {
				unreadable[step] = true
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
	n, err := c.collectOrphans(ctx, referenced, unreadable)
	res.OrphanObjects = n
	if err != nil {
		return res, fmt.Errorf("prune %s: %w", c.cfg.Job, err)
	}
	if len(res.Deleted) > 0 || n > 0 {
		c.log.Info("checkpoints pruned", "deleted_steps", res.Deleted, "orphan_objects", n)
	}
	return res, nil
}

// keepSet picks the steps to keep; steps are newest first. Only usable
// checkpoints count towards Keep; broken ones met before Keep usable ones
// are kept uncounted. A store error (not a missing shard) is returned, so
// that Prune deletes nothing it could not judge.
func (c *Catalog) keepSet(ctx context.Context, steps []int64, manifests map[int64]*Manifest) (map[int64]bool, error) {
	keep := map[int64]bool{}
	kept := 0
	for _, step := range steps {
		if kept >= c.cfg.Keep {
			break
		}
		m, ok := manifests[step]
		if !ok {
			continue
		}
		keep[step] = true
		if m == nil {
			continue
		}
		usable, err := c.shardsPresent(ctx, m)
		if err != nil {
			return nil, err
		}
		if usable {
			kept++
		} else {
			c.log.Warn("checkpoint broken: not counted towards keep", "step", step)
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
	return keep, nil
}

// shardsPresent is Restore's cheap check: every shard of m exists with the
// size m records. false for a missing or resized shard; other errors are
// the store's.
func (c *Catalog) shardsPresent(ctx context.Context, m *Manifest) (bool, error) {
	for _, s := range m.Shards {
		st, err := c.store.Stat(ctx, s.Key)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if st.Size != s.Size {
			return false, nil
		}
	}
	return true, nil
}

// collectOrphans deletes shard directories no kept manifest names whose
// newest object is older than the grace period. Directories of a step in
// unreadable (a kept manifest that does not parse, so its shard keys are
// unknown) are left alone.
func (c *Catalog) collectOrphans(ctx context.Context, referenced map[string]bool, unreadable map[int64]bool) (int, error) {
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
		if step, ok := stepOfShardDir(c.cfg.Job, d); ok && unreadable[step] {
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
	if sw, ok := c.store.(tempSweeper); ok {
		k, err := sw.sweepTemps(ctx, c.cfg.Job+"/", cutoff)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// tempSweeper is a Store whose unfinished writes List does not show (the
// file store's temporary files, an S3 store's incomplete multipart
// uploads); Prune has it delete those older than the orphan grace period,
// the leftovers of a process killed mid-Put.
type tempSweeper interface {
	sweepTemps(ctx context.Context, prefix string, cutoff time.Time) (int, error)
}

func dirOf(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[:i+1]
	}
	return ""
}

// stepOfShardDir parses the step from a shard directory (shardDir's form),
// false for any other.
func stepOfShardDir(job, dir string) (int64, bool) {
	name, ok := strings.CutPrefix(dir, shardPrefix(job))
	if !ok || len(name) < 21 || name[20] != '-' {
		return 0, false
	}
	step, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || step < 0 {
		return 0, false
	}
	return step, true
}
