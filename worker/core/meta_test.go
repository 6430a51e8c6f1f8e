package core

import (
	"slices"
	"testing"
)

// The built-in trainer's float32 block, read by exactBlock, must give live
// mode's integer block: the two data planes share decideStep, readSlot
// and consumption.
func TestExactMetaIsTheLiveLayout(t *testing.T) {
	big := int64(MaxExact - 1) // the largest offset a float32 slot carries
	tests := []struct {
		name                     string
		count, sw, stop, blocked int
		slots                    []Slot
		want                     []int64
	}{
		{"two ranks with samples", 8, 0, 0, 0,
			[]Slot{{Part: 0, Start: 0, End: 4}, {Part: 3, Start: 12, End: 16, Fin: true}},
			testBlock(8, 0, 0, 0, [4]int64{0, 0, 4, 0}, [4]int64{3, 12, 16, flagFin})},
		{"votes and a leaver without samples", 4, 2, 1, 1,
			[]Slot{{Part: 1, Start: 4, End: 8, Leaving: true}, {Part: -1, Leaving: true}, {Part: -1}},
			testBlock(4, 2, 1, 1, [4]int64{1, 4, 8, FlagLeaving}, [4]int64{-1, 0, 0, FlagLeaving}, [4]int64{-1, 0, 0, 0})},
		{"offsets up to 2^24 exactly", 1, 0, 0, 0,
			[]Slot{{Part: 7, Start: big - 1, End: big, Fin: true, Leaving: true}},
			testBlock(1, 0, 0, 0, [4]int64{7, big - 1, big, flagFin | FlagLeaving})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			world := len(tc.slots)
			meta := make([]float32, BlockLen(world))
			meta[BlockCount], meta[BlockSwitch] = float32(tc.count), float32(tc.sw)
			meta[BlockStop], meta[BlockBlocked] = float32(tc.stop), float32(tc.blocked)
			for r, s := range tc.slots {
				PutSlot(meta, r, s)
			}
			// A reused buffer of another world's size is resized.
			got := ExactBlock(meta, world, make([]int64, 2))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("exactBlock = %v, want %v", got, tc.want)
			}
			for r, s := range tc.slots {
				if g := ReadSlot(got, r); g != s {
					t.Errorf("rank %d: slot %+v, want %+v", r, g, s)
				}
			}
		})
	}
}

func TestAllLeaving(t *testing.T) {
	leaving, staying := [4]int64{-1, 0, 0, FlagLeaving}, [4]int64{0, 0, 4, 0}
	if !AllLeaving(testBlock(0, 0, 0, 0, leaving, leaving), 2) {
		t.Error("every rank leaving: want true")
	}
	if AllLeaving(testBlock(4, 0, 0, 0, leaving, staying), 2) {
		t.Error("one rank staying: want false")
	}
}
