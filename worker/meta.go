package worker

import "math"

// The metadata block rides at the end of every all-reduce buffer. Each rank
// writes only its own slot (the others are zero), so after the sum every
// member holds every rank's values exactly: float32 represents integers up
// to 2^24 exactly, which bounds partition counts and partition sizes.
const (
	metaLoss    = 0 // sum of per-sample losses
	metaCount   = 1 // samples in the step
	metaSwitch  = 2 // members that saw a newer generation
	metaStop    = 3 // members that saw the job cancelled
	metaBlocked = 4 // members that could not reach the data pipeline
	metaHead    = 5
	slotWidth   = 4 // per rank: partition+1, start, end, flags

	flagLeaving = 1
	flagFin     = 2
)

// maxExact is the largest integer a float32 slot carries exactly.
const maxExact = 1 << 24

func metaLen(world int) int { return metaHead + slotWidth*world }

// slot is one rank's consumption in a step.
type slot struct {
	Part       int // -1: none
	Start, End int64
	Leaving    bool
	Fin        bool
}

func putSlot(meta []float32, rank int, s slot) {
	b := meta[metaHead+slotWidth*rank:]
	b[0] = float32(s.Part + 1)
	b[1] = float32(s.Start)
	b[2] = float32(s.End)
	var f int
	if s.Leaving {
		f |= flagLeaving
	}
	if s.Fin {
		f |= flagFin
	}
	b[3] = float32(f)
}

// exactMeta reads a summed block of world ranks as integers, in the
// layout of live mode's metadata (livedecide.go: liveCount..liveHead, then
// the same slots), into out (reused when large enough): both data planes
// then decide and account for a step with the same code (decideStep,
// liveSlot, liveConsumption). The loss stays in meta[metaLoss].
func exactMeta(meta []float32, world int, out []int64) []int64 {
	n := liveMetaLen(world)
	if cap(out) < n {
		out = make([]int64, n)
	}
	out = out[:n]
	out[liveCount] = int64(count(meta, metaCount))
	out[liveSwitch] = int64(count(meta, metaSwitch))
	out[liveStop] = int64(count(meta, metaStop))
	out[liveBlocked] = int64(count(meta, metaBlocked))
	for i := range slotWidth * world {
		out[liveHead+i] = int64(math.Round(float64(meta[metaHead+i])))
	}
	return out
}

func count(meta []float32, i int) int { return int(math.Round(float64(meta[i]))) }
