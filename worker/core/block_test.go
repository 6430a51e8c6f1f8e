package core

import (
	"reflect"
	"testing"

	"github.com/edl-nomad/edl/worker/datapipe"
)

// testBlock builds a summed block: head values, then (part, start, end, flags) per rank.
func testBlock(count, sw, stop, blocked int64, slots ...[4]int64) []int64 {
	m := []int64{count, sw, stop, blocked}
	for _, s := range slots {
		m = append(m, s[0]+1, s[1], s[2], s[3])
	}
	return m
}

func TestDecideStep(t *testing.T) {
	none := [4]int64{-1, 0, 0, 0}
	leaving := [4]int64{-1, 0, 0, FlagLeaving}
	tests := []struct {
		name        string
		meta        []int64
		rank, epoch int
		epochs      int
		want        StepVerdict
	}{
		{"samples: apply, go on", testBlock(8, 0, 0, 0, [4]int64{0, 0, 4, 0}, [4]int64{1, 0, 4, 0}), 0, 0, 1, StepVerdict{Apply: true, Action: ActContinue}},
		{"empty, no votes: epoch done", testBlock(0, 0, 0, 0, none, none), 0, 0, 2, StepVerdict{EpochDone: true, Action: ActContinue}},
		{"empty in the last epoch: done", testBlock(0, 0, 0, 0, none, none), 1, 1, 2, StepVerdict{EpochDone: true, Action: ActDone}},
		{"empty with a switch vote: no epoch end", testBlock(0, 1, 0, 0, none, none), 0, 0, 1, StepVerdict{Action: ActSwitch}},
		{"blocked: wait", testBlock(0, 0, 0, 1, none, none), 0, 0, 1, StepVerdict{Wait: true, Action: ActContinue}},
		{"blocked and switch: switch without waiting", testBlock(0, 1, 0, 1, none, none), 0, 0, 1, StepVerdict{Action: ActSwitch}},
		{"stop wins over switch", testBlock(4, 1, 1, 0, [4]int64{0, 0, 4, 0}, none), 0, 0, 1, StepVerdict{Apply: true, Action: ActStop}},
		{"the leaver leaves after its step", testBlock(4, 0, 0, 0, [4]int64{0, 0, 4, FlagLeaving}, none), 0, 0, 1, StepVerdict{Apply: true, Action: ActLeave}},
		{"the others switch", testBlock(4, 0, 0, 0, [4]int64{0, 0, 4, FlagLeaving}, none), 1, 0, 1, StepVerdict{Apply: true, Action: ActSwitch}},
		{"a leaver without samples still leaves", testBlock(4, 0, 0, 0, [4]int64{0, 0, 4, 0}, leaving), 1, 0, 1, StepVerdict{Apply: true, Action: ActLeave}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DecideStep(tc.meta, (len(tc.meta)-BlockHead)/SlotWidth, tc.rank, tc.epoch, tc.epochs); got != tc.want {
				t.Errorf("decideStep = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestLiveConsumptionAndSlotsAboveFloat32(t *testing.T) {
	big := int64(1<<24 + 1) // a float32 block would round this offset
	meta := testBlock(3, 0, 0, 0, [4]int64{2, big - 2, big + 1, flagFin}, [4]int64{-1, 0, 0, 0})
	if s := ReadSlot(meta, 0); s.End != big+1 || s.Start != big-2 || !s.Fin || s.Part != 2 {
		t.Fatalf("slot %+v", s)
	}
	got, dbg := Consumption(meta, []string{"a", "b"}, 3, true)
	want := []datapipe.Consumption{{Worker: "a", Part: 2, End: big + 1, Fin: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("consumption %+v, want %+v", got, want)
	}
	if wantDbg := "3|2:16777215:16777218,"; dbg != wantDbg {
		t.Errorf("debug record %q, want %q", dbg, wantDbg)
	}
}

func TestLivePartitionCoversTheDataSet(t *testing.T) {
	var next int64
	for p := range 7 {
		first, n := ExecPartition(100, 7, p)
		if first != next || n < 14 || n > 15 {
			t.Fatalf("partition %d: first %d size %d (after %d)", p, first, n, next)
		}
		next = first + n
	}
	if next != 100 {
		t.Fatalf("partitions end at %d, want 100", next)
	}
}
