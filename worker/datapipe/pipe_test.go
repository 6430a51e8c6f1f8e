package datapipe

import (
	"context"
	"errors"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/coord"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestCommitRollbackAndReturn walks a failure: worker b applies and commits
// a step the survivors never applied, then dies; the root's reconcile rolls
// b's commit back, applies its own record of b's last shared step, and puts
// b's partition back at that offset.
func TestCommitRollbackAndReturn(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	keys := coord.NewKeys(r.Prefix, "job")
	if err := r.Client.Set(ctx, keys.GenNum(), 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	a, b := New(r.Client, keys, "a"), New(r.Client, keys, "b")
	order := []int{3, 1, 2, 0}
	pa, off, err := a.Claim(ctx, 1, 0, -1, order)
	if err != nil || pa != 3 || off != 0 {
		t.Fatalf("a claims %d@%d (%v), want 3@0", pa, off, err)
	}
	pb, _, _ := b.Claim(ctx, 1, 0, -1, order)
	if again, _, _ := a.Claim(ctx, 1, 0, -1, order); again != pa {
		t.Fatalf("a's second claim got %d, want its own %d back", again, pa)
	}
	commit := func(p *Pipe, gen, step int64, part int, off int64) error {
		_, err := p.Commit(ctx, Commit{Gen: gen, Step: step, Epoch: 0, Part: part, Offset: off}, nil)
		return err
	}
	for step, off := range []int64{10, 20, 30} { // steps 0..2, b one step ahead in Redis
		if err := commit(b, 1, int64(step), pb, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := commit(a, 1, 0, pa, 10); err != nil {
		t.Fatal(err)
	}
	// a's last applied step is 1 (it saw b's step-1 end at 20); b is gone.
	n, err := a.Reconcile(ctx, Reconciliation{Gen: 2, Applied: 1, Epoch: 0, MetaEpoch: 0, Members: []string{"a"},
		Meta: []Consumption{{Worker: "a", Part: pa, End: 20}, {Worker: "b", Part: pb, End: 20}}})
	if err != nil || n != 1 {
		t.Fatalf("reconcile returned %d partitions (%v), want 1", n, err)
	}
	if err := r.Client.Set(ctx, keys.GenNum(), 2, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := commit(b, 1, 2, pb, 30); !errors.Is(err, ErrFenced) {
		t.Fatalf("late commit of a discarded step: %v, want ErrFenced", err)
	}
	if _, _, err := b.Claim(ctx, 1, 0, 1, order); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("claim from an old generation: %v, want ErrStaleGeneration", err)
	}
	c := New(r.Client, keys, "c")
	got, off, err := c.Claim(ctx, 2, 0, 1, order)
	if err != nil || got != pb || off != 20 {
		t.Fatalf("c claims %d@%d (%v), want b's %d back at 20", got, off, err, pb)
	}
	_, off, _ = a.Claim(ctx, 2, 0, 1, order)
	if off != 20 {
		t.Fatalf("a resumes at %d, want 20 (its step-1 end from the root's record)", off)
	}
	if err := c.Release(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got, off, _ := New(r.Client, keys, "d").Claim(ctx, 2, 0, 1, order); got != pb || off != 20 {
		t.Fatalf("after release, d claims %d@%d, want %d@20", got, off, pb)
	}
}
