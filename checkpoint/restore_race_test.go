package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/edl-nomad/edl/checkpoint"
)

// TestRestoreWhileRetentionPrunesItsCandidate: a restore is reading the
// only checkpoint (step 10) when a writer of the same job (a leader of
// the old generation finishing its upload) commits step 20 and, with keep
// 1, prunes step 10 under the restore's feet. The restore must load step
// 20, not answer ErrNoCheckpoint: the worker took that as "no checkpoint"
// and trained from step 0 while a committed checkpoint sat in the store.
func TestRestoreWhileRetentionPrunesItsCandidate(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			for _, at := range []string{"manifest", "params"} {
				t.Run("pruned after its "+at+" is read", func(t *testing.T) {
					ctx := context.Background()
					s := be.open(t)
					w := newCatalog(t, s, checkpoint.Config{Keep: 1})
					write(t, w, checkpoint.Meta{Step: 10}, stateAt(10, 4096))
					newer := stateAt(20, 4096)
					suffix := fmt.Sprintf("/manifests/%020d.json", 10)
					if at == "params" {
						m, err := w.Manifest(ctx, 10)
						if err != nil {
							t.Fatal(err)
						}
						suffix = shardKey(t, m, checkpoint.ShardParams)
					}
					ps := &pruneOnGet{Store: s, suffix: suffix}
					ps.hook = func() {
						write(t, w, checkpoint.Meta{Step: 20}, newer)
						if res, err := w.Prune(ctx); err != nil || len(res.Deleted) != 1 {
							t.Errorf("Prune = %+v, %v; want step 10 deleted", res, err)
						}
					}
					r := newCatalog(t, ps, checkpoint.Config{Keep: 1})
					var got state
					m, err := r.Restore(ctx, loadAll(&got), nil)
					if err != nil {
						t.Fatalf("restore with step 20 committed meanwhile: %v", err)
					}
					if m.Step != 20 || !bytes.Equal(got[checkpoint.ShardParams], newer[checkpoint.ShardParams]) {
						t.Errorf("restored step %d, want 20 with its params", m.Step)
					}
				})
			}
		})
	}
}
