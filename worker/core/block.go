package core

import (
	"math"
	"strconv"

	"github.com/edl-nomad/edl/worker/datapipe"
)

// The step block: the metadata every step's all-reduce carries after the
// gradient, in one layout for both data planes. The built-in trainer sums
// it as float32 at the tail of its gradient buffer (collective's
// AllReduceExactTail: never compressed; exact for integers up to 2^24,
// which bounds partition counts and sizes: maxExact); a live program sums
// it in its one small extra all-reduce (a float64 tensor, exact up to
// 2^53) and sends it to its worker as integers ("step": meta). Each rank
// writes only its own slot (the others are zero), so after the sum every
// member holds every rank's values exactly, and decideStep, readSlot and
// consumption give the same verdict and accounting on every member. The
// step's loss travels beside the block (the built-in trainer: the float
// just before it; live: the step request's loss).
const (
	BlockCount   = 0 // samples in the step
	BlockSwitch  = 1 // members that saw a newer generation
	BlockStop    = 2 // members that saw the job cancelled
	BlockBlocked = 3 // members that could not reach the data pipeline
	BlockHead    = 4
	SlotWidth    = 4 // per rank: partition+1, start, end, flags

	FlagLeaving = 1
	flagFin     = 2
)

// MaxExact is the largest integer a float32 slot carries exactly.
const MaxExact = 1 << 24

// BlockLen is the length of a step block for world ranks.
func BlockLen(world int) int { return BlockHead + SlotWidth*world }

// Slot is one rank's consumption in a step.
type Slot struct {
	Part       int // -1: none
	Start, End int64
	Leaving    bool
	Fin        bool
}

// PutSlot writes rank's slot into a float32 block (the built-in trainer's).
func PutSlot(block []float32, rank int, s Slot) {
	b := block[BlockHead+SlotWidth*rank:]
	b[0] = float32(s.Part + 1)
	b[1] = float32(s.Start)
	b[2] = float32(s.End)
	var f int
	if s.Leaving {
		f |= FlagLeaving
	}
	if s.Fin {
		f |= flagFin
	}
	b[3] = float32(f)
}

// ReadSlot reads rank's slot from a summed block.
func ReadSlot(block []int64, rank int) Slot {
	b := block[BlockHead+SlotWidth*rank:]
	return Slot{Part: int(b[0]) - 1, Start: b[1], End: b[2], Leaving: b[3]&FlagLeaving != 0, Fin: b[3]&flagFin != 0}
}

// ExactBlock reads a summed float32 block of world ranks as integers into
// out (reused when large enough): the same layout, rounded.
func ExactBlock(block []float32, world int, out []int64) []int64 {
	n := BlockLen(world)
	if cap(out) < n {
		out = make([]int64, n)
	}
	out = out[:n]
	for i := range n {
		out[i] = int64(math.Round(float64(block[i])))
	}
	return out
}

// stepAction is what the program does after a step.
type stepAction string

const (
	ActContinue stepAction = "continue" // the next step in this generation
	ActSwitch   stepAction = "switch"   // rebuild the group for the next generation
	ActLeave    stepAction = "leave"    // this worker leaves: the program returns from steps
	ActDone     stepAction = "done"     // the last epoch ended
	ActStop     stepAction = "stop"     // the job is cancelled
)

// StepVerdict is the decision after a step's all-reduce completed on every
// member: identical on every member, since it reads only the summed block.
type StepVerdict struct {
	Apply     bool // the step's samples count: one applied step
	EpochDone bool // nobody had samples and nobody voted: the epoch is over
	Wait      bool // someone cannot reach Redis: pause before the next step
	Action    stepAction
}

// DecideStep is the post-all-reduce decision of the built-in trainer's
// step loop (worker/builtin step.go: (*Worker).train) and of live mode, as a pure function: a step with
// samples is applied; an empty step without votes ends the epoch (the
// last one ends the job); a stop vote stops, a switch vote switches; a
// leaver leaves after its last step and the others switch.
func DecideStep(meta []int64, world, rank, epoch, epochs int) StepVerdict {
	var v StepVerdict
	total, switches, stops, blocks := meta[BlockCount], meta[BlockSwitch], meta[BlockStop], meta[BlockBlocked]
	switch {
	case total > 0:
		v.Apply = true
	case switches == 0 && stops == 0 && blocks == 0:
		v.EpochDone = true
		if epoch+1 >= epochs {
			v.Action = ActDone
			return v
		}
	case blocks > 0 && switches == 0:
		v.Wait = true
	}
	switch {
	case stops > 0:
		v.Action = ActStop
		return v
	case switches > 0:
		v.Action = ActSwitch
		return v
	}
	leavers := 0
	for r := range world {
		if ReadSlot(meta, r).Leaving {
			leavers++
		}
	}
	switch {
	case ReadSlot(meta, rank).Leaving:
		v.Action = ActLeave
	case leavers > 0:
		v.Action = ActSwitch
	default:
		v.Action = ActContinue
	}
	return v
}

// Consumption is every rank's consumption in an applied step, for the
// training state (the root's copy goes into reconcile: datapipe/doc.go,
// mechanism 1), and the step's debug record payload.
func Consumption(meta []int64, members []string, epoch int, debug bool) ([]datapipe.Consumption, string) {
	var out []datapipe.Consumption
	var dbg []byte
	if debug {
		dbg = strconv.AppendInt(dbg, int64(epoch), 10)
		dbg = append(dbg, '|')
	}
	for r := range members {
		s := ReadSlot(meta, r)
		if s.Part < 0 {
			continue
		}
		out = append(out, datapipe.Consumption{Worker: members[r], Part: s.Part, End: s.End, Fin: s.Fin})
		if debug {
			dbg = strconv.AppendInt(dbg, int64(s.Part), 10)
			dbg = append(dbg, ':')
			dbg = strconv.AppendInt(dbg, s.Start, 10)
			dbg = append(dbg, ':')
			dbg = strconv.AppendInt(dbg, s.End, 10)
			dbg = append(dbg, ',')
		}
	}
	return out, string(dbg)
}

// ExecPartition is partition p of an exec data set of samples samples in
// parts partitions: its first global sample index and its size (the
// built-in data set's layout, trainer.Dataset.Partition).
func ExecPartition(samples int64, parts, p int) (first, size int64) {
	n := int64(parts)
	first = samples * int64(p) / n
	return first, samples*int64(p+1)/n - first
}

// AllLeaving reports whether every rank of a step's block (exactBlock)
// leaves after it.
func AllLeaving(m []int64, world int) bool {
	for r := range world {
		if !ReadSlot(m, r).Leaving {
			return false
		}
	}
	return true
}
