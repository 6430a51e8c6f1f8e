package core

import (
	"fmt"
	"slices"
	"testing"
)

func TestShareSize(t *testing.T) {
	tests := []struct {
		name  string
		left  int64
		batch int
		want  int
	}{
		{"remainder 0: the batch ends the partition", 24, 12, 12},
		{"remainder 1: the tail merges, batch+1", 13, 12, 13},
		{"remainder 2: the batch, two samples stay", 14, 12, 12},
		{"a full batch and more", 100, 12, 12},
		{"937 at 24: the 39th batch takes 25", 25, 24, 25},
		{"the colleague's 250 at 249: one batch of 250", 250, 249, 250},
		{"partition shorter than the batch: all of it", 7, 12, 7},
		{"exactly the batch", 12, 12, 12},
		{"a single sample left (a restore, an old offset): 1", 1, 12, 1},
		{"a partition of 1", 1, 1, 1},
		{"batch 1, two left: both (never leave one behind)", 2, 1, 2},
		{"batch 1, three left: 1", 3, 1, 1},
		{"batch 1, one left", 1, 1, 1},
		{"batch 2, three left: 3", 3, 2, 3},
		{"nothing left", 0, 12, 0},
		{"past the end", -3, 12, 0},
		{"no batch", 10, 0, 0},
	}
	for _, tc := range tests {
		if got := ShareSize(tc.left, tc.batch); got != tc.want {
			t.Errorf("%s: ShareSize(%d, %d) = %d, want %d", tc.name, tc.left, tc.batch, got, tc.want)
		}
	}
}

// walk hands out a partition of size samples from offset off, the batch
// of each step from batches (the last one repeating): the shares.
func walk(size, off int64, batches ...int) []int {
	var out []int
	for i := 0; off < size; i++ {
		n := ShareSize(size-off, batches[min(i, len(batches)-1)])
		out = append(out, n)
		off += int64(n)
	}
	return out
}

// TestShareSizeWalks: whole partitions, world changes mid-partition (the
// rank's batch changes at the same offset), a resumed offset.
func TestShareSizeWalks(t *testing.T) {
	tests := []struct {
		name      string
		size, off int64
		batches   []int
		want      []int
	}{
		{"25 at 12: 12, 13 (not 12, 12, 1)", 25, 0, []int{12}, []int{12, 13}},
		{"937 at 24: 38 batches of 24, then 25", 937, 0, []int{24}, append(slices.Repeat([]int{24}, 38), 25)},
		{"938 at 24: 39 batches, then 2", 938, 0, []int{24}, append(slices.Repeat([]int{24}, 39), 2)},
		{"world 2 -> 3 mid-partition: 12, then 8s, the tail merged", 101, 0, []int{12, 8},
			[]int{12, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 9}},
		{"world 3 -> 2 mid-partition", 101, 0, []int{8, 8, 8, 12}, []int{8, 8, 8, 12, 12, 12, 12, 12, 12, 5}},
		{"world 2 -> 1 -> 2: batches 24, 48, 24", 97, 0, []int{24, 48, 24}, []int{24, 48, 25}},
		{"a resize that leaves one: 1 is what it left", 25, 24, []int{12}, []int{1}},
		{"resumed at a committed offset", 25, 12, []int{12}, []int{13}},
		{"shorter than the batch", 5, 0, []int{12}, []int{5}},
		{"batch 1: ones, the last two together", 5, 0, []int{1}, []int{1, 1, 1, 2}},
	}
	for _, tc := range tests {
		if got := walk(tc.size, tc.off, tc.batches...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: shares %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestShareSizeNeverLeavesOne: over every partition size, start offset
// and pair of batches (a world change after the first step), the shares
// cover the rest of the partition exactly, none exceeds its batch by more
// than one, none leaves a single sample behind, and none is a single
// sample unless its batch is 1 or a single sample was all that was left
// at the start.
func TestShareSizeNeverLeavesOne(t *testing.T) {
	for size := int64(1); size <= 60; size++ {
		for off := int64(0); off < size; off++ {
			for b1 := 1; b1 <= 13; b1++ {
				for b2 := 1; b2 <= 13; b2++ {
					batches := []int{b1, b2}
					shares := walk(size, off, batches...)
					sum := int64(0)
					for i, n := range shares {
						b := batches[min(i, 1)]
						where := fmt.Sprintf("size %d from %d, batches %d then %d: shares %v", size, off, b1, b2, shares)
						if n < 1 || n > b+1 {
							t.Fatalf("%s: share %d outside [1, %d]", where, n, b+1)
						}
						if n == 1 && b > 1 && !(i == 0 && size-off == 1) {
							t.Fatalf("%s: a one-sample share", where)
						}
						sum += int64(n)
						if size-off-sum == 1 {
							t.Fatalf("%s: share %d leaves one sample", where, i)
						}
					}
					if sum != size-off {
						t.Fatalf("size %d from %d, batches %d then %d: shares %v sum to %d, want %d", size, off, b1, b2, shares, sum, size-off)
					}
				}
			}
		}
	}
}
