package worker

import (
	"slices"
	"testing"
)

// The built-in trainer's float32 block, read by exactBlock, must give live
// mode's integer block: the two data planes share decideStep, readSlot
// and consumption.
func TestExactMetaIsTheLiveLayout(t *testing.T) {
	big := int64(maxExact - 1) // the largest offset a float32 slot carries
	tests := []struct {
		name                     string
		count, sw, stop, blocked int
		slots                    []slot
		want                     []int64
	}{
		{"two ranks with samples", 8, 0, 0, 0,
			[]slot{{Part: 0, Start: 0, End: 4}, {Part: 3, Start: 12, End: 16, Fin: true}},
			testBlock(8, 0, 0, 0, [4]int64{0, 0, 4, 0}, [4]int64{3, 12, 16, flagFin})},
		{"votes and a leaver without samples", 4, 2, 1, 1,
			[]slot{{Part: 1, Start: 4, End: 8, Leaving: true}, {Part: -1, Leaving: true}, {Part: -1}},
			testBlock(4, 2, 1, 1, [4]int64{1, 4, 8, flagLeaving}, [4]int64{-1, 0, 0, flagLeaving}, [4]int64{-1, 0, 0, 0})},
		{"offsets up to 2^24 exactly", 1, 0, 0, 0,
			[]slot{{Part: 7, Start: big - 1, End: big, Fin: true, Leaving: true}},
			testBlock(1, 0, 0, 0, [4]int64{7, big - 1, big, flagFin | flagLeaving})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			world := len(tc.slots)
			meta := make([]float32, blockLen(world))
			meta[blockCount], meta[blockSwitch] = float32(tc.count), float32(tc.sw)
			meta[blockStop], meta[blockBlocked] = float32(tc.stop), float32(tc.blocked)
			for r, s := range tc.slots {
				putSlot(meta, r, s)
			}
			// A reused buffer of another world's size is resized.
			got := exactBlock(meta, world, make([]int64, 2))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("exactBlock = %v, want %v", got, tc.want)
			}
			for r, s := range tc.slots {
				if g := readSlot(got, r); g != s {
					t.Errorf("rank %d: slot %+v, want %+v", r, g, s)
				}
			}
		})
	}
}

func TestAllLeaving(t *testing.T) {
	leaving, staying := [4]int64{-1, 0, 0, flagLeaving}, [4]int64{0, 0, 4, 0}
	if !allLeaving(testBlock(0, 0, 0, 0, leaving, leaving), 2) {
		t.Error("every rank leaving: want true")
	}
	if allLeaving(testBlock(4, 0, 0, 0, leaving, staying), 2) {
		t.Error("one rank staying: want false")
	}
}
