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

// TestStaleReconcileRefused: the root of generation 2 runs reconcile late,
// after generation 3's root reconciled and its member applied and committed
// step 6 (cursor and debug record together). The stale reconcile (L=5) must
// neither roll the cursor back nor drop the record: the member goes on from
// the cursor it holds, so either change alone loses or repeats samples.
// Restore from a stale generation is refused the same way.
func TestStaleReconcileRefused(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	keys := coord.NewKeys(r.Prefix, "job")
	setGen := func(n int) {
		if err := r.Client.Set(ctx, keys.GenNum(), n, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setGen(1)
	a := New(r.Client, keys, "a")
	order := []int{0, 1}
	part, _, err := a.Claim(ctx, 1, 0, -1, order)
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(0); step <= 5; step++ {
		cm := Commit{Gen: 1, Step: step, Epoch: 0, Part: part, Offset: 5 * (step + 1)}
		if _, err := a.Commit(ctx, cm, []DebugRecord{{Step: step, Payload: "0|x"}}); err != nil {
			t.Fatal(err)
		}
	}
	setGen(3) // generation 2 failed to start; 3 is a alone, root at L=5
	rec := Reconciliation{Gen: 3, Applied: 5, Members: []string{"a"},
		Meta: []Consumption{{Worker: "a", Part: part, End: 30}}, Debug: "0|x"}
	if _, err := a.Reconcile(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, Commit{Gen: 3, Step: 6, Epoch: 0, Part: part, Offset: 54},
		[]DebugRecord{{Step: 6, Payload: "0|y"}}); err != nil {
		t.Fatal(err)
	}
	stale := rec
	stale.Gen, stale.Members = 2, []string{"a", "b"}
	if _, err := New(r.Client, keys, "b").Reconcile(ctx, stale); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("reconcile of generation 2 under 3: %v, want ErrStaleGeneration", err)
	}
	if err := a.Restore(ctx, 2, 1, nil, 5); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("restore of generation 2 under 3: %v, want ErrStaleGeneration", err)
	}
	recs, err := a.DebugRecords(ctx)
	if err != nil || recs[6] != "0|y" {
		t.Fatalf("debug record of step 6 = %q (%v), want kept", recs[6], err)
	}
	if _, off, err := a.Claim(ctx, 3, 0, 6, order); err != nil || off != 54 {
		t.Fatalf("a's cursor %d (%v), want 54 (step 6's commit kept)", off, err)
	}
	// The current generation's restore still works and drops records after L.
	if err := a.Restore(ctx, 3, 1, nil, 5); err != nil {
		t.Fatal(err)
	}
	if recs, _ := a.DebugRecords(ctx); recs[6] != "" || recs[5] == "" {
		t.Fatalf("after restore at 5: records %v, want 0..5", recs)
	}
}
