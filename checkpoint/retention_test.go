package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
)

func listSteps(t *testing.T, c *checkpoint.Catalog) string {
	t.Helper()
	list, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, m := range list {
		steps = append(steps, m.Step)
	}
	return fmt.Sprint(steps)
}

func TestPruneRetention(t *testing.T) {
	t.Parallel()
	// (step, epoch) pairs written in order.
	history := [][2]int64{{10, 0}, {20, 0}, {30, 1}, {40, 1}, {50, 2}, {60, 2}, {70, 3}}
	cases := []struct {
		name         string
		keep         int
		keepPerEpoch bool
		want         string
	}{
		{"keep last 2", 2, false, "[60 70]"},
		{"keep last 3", 3, false, "[50 60 70]"},
		{"keep last 2 and newest of every epoch", 2, true, "[20 40 60 70]"},
		{"keep more than exist", 10, false, "[10 20 30 40 50 60 70]"},
	}
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					s := be.open(t)
					clk := &clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
					c := newCatalog(t, s, checkpoint.Config{Keep: tc.keep, KeepPerEpoch: tc.keepPerEpoch, Now: clk.Now})
					for _, h := range history {
						write(t, c, checkpoint.Meta{Step: h[0], Epoch: int(h[1])}, stateAt(h[0], 512))
					}
					if _, err := c.Prune(context.Background()); err != nil {
						t.Fatal(err)
					}
					if got := listSteps(t, c); got != tc.want {
						t.Errorf("after Prune: %s, want %s", got, tc.want)
					}
					// Every shard left belongs to a kept manifest.
					list, _ := c.List(context.Background())
					live := map[string]bool{}
					for _, m := range list {
						for _, sh := range m.Shards {
							live[sh.Key] = true
						}
					}
					objs, err := s.List(context.Background(), "job-1/shards/")
					if err != nil {
						t.Fatal(err)
					}
					if len(objs) != len(live) {
						t.Errorf("%d shard objects remain, want the %d the kept manifests name", len(objs), len(live))
					}
				})
			}
		})
	}
}

func TestPruneCollectsOrphansAfterGrace(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			s := be.open(t)
			// The store stamps objects with the real time; the catalog's
			// clock starts there and moves on.
			clk := &clock{now: time.Now()}
			c := newCatalog(t, s, checkpoint.Config{Keep: 5, OrphanGrace: 10 * time.Minute, Now: clk.Now})
			write(t, c, checkpoint.Meta{Step: 1}, stateAt(1, 256))
			// A write that died before its manifest: shards without one.
			ctx := context.Background()
			orphans := []string{"job-1/shards/00000000000000000002-deadbeef0000/params", "job-1/shards/00000000000000000002-deadbeef0000/data"}
			for _, k := range orphans {
				if err := s.Put(ctx, k, strings.NewReader("partial"), 7); err != nil {
					t.Fatal(err)
				}
			}
			res, err := c.Prune(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.OrphanObjects != 0 {
				t.Fatalf("Prune inside the grace period removed %d objects, want 0 (the write may be in flight)", res.OrphanObjects)
			}
			clk.Add(11 * time.Minute)
			res, err = c.Prune(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.OrphanObjects != 2 {
				t.Errorf("Prune after the grace period removed %d orphan objects, want 2", res.OrphanObjects)
			}
			for _, k := range orphans {
				if _, err := s.Stat(ctx, k); err == nil {
					t.Errorf("orphan %s still there", k)
				}
			}
			// The committed checkpoint is untouched and still verifies.
			var got state
			if m, err := c.Restore(ctx, loadAll(&got), nil); err != nil || m.Step != 1 {
				t.Errorf("restore after orphan collection: %v", err)
			}
			if !bytes.Equal(got[checkpoint.ShardParams], stateAt(1, 256)[checkpoint.ShardParams]) {
				t.Errorf("committed checkpoint changed")
			}
		})
	}
}
