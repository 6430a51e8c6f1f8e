package worker

import (
	"strconv"

	"github.com/edl-nomad/edl/worker/datapipe"
)

// Live mode's per-step metadata: what the program's one small extra
// all-reduce sums (a float64 tensor, exact for integers up to 2^53, never
// compressed), sent back to the worker as integers. Each rank writes only
// its own slot, as in the built-in trainer's block (meta.go), so after the
// sum every member holds every rank's consumption exactly.
const (
	liveCount   = 0 // samples in the step
	liveSwitch  = 1 // members that saw a newer generation
	liveStop    = 2 // members that saw the job cancelled
	liveBlocked = 3 // members that could not reach the data pipeline
	liveHead    = 4
)

// liveMetaLen is the length of a live step's metadata for world ranks.
func liveMetaLen(world int) int { return liveHead + slotWidth*world }

// liveSlot reads rank's slot from a summed live metadata block.
func liveSlot(meta []int64, rank int) slot {
	b := meta[liveHead+slotWidth*rank:]
	return slot{Part: int(b[0]) - 1, Start: b[1], End: b[2], Leaving: b[3]&flagLeaving != 0, Fin: b[3]&flagFin != 0}
}

// stepAction is what the program does after a step.
type stepAction string

const (
	actContinue stepAction = "continue" // the next step in this generation
	actSwitch   stepAction = "switch"   // rebuild the group for the next generation
	actLeave    stepAction = "leave"    // this worker leaves: the program returns from steps
	actDone     stepAction = "done"     // the last epoch ended
	actStop     stepAction = "stop"     // the job is cancelled
)

// stepVerdict is the decision after a step's all-reduce completed on every
// member: identical on every member, since it reads only the summed block.
type stepVerdict struct {
	Apply     bool // the step's samples count: one applied step
	EpochDone bool // nobody had samples and nobody voted: the epoch is over
	Wait      bool // someone cannot reach Redis: pause before the next step
	Action    stepAction
}

// decideStep is the post-all-reduce decision of the built-in trainer's
// step loop (step.go: (*Worker).train), as a pure function: a step with
// samples is applied; an empty step without votes ends the epoch (the
// last one ends the job); a stop vote stops, a switch vote switches; a
// leaver leaves after its last step and the others switch.
func decideStep(meta []int64, world, rank, epoch, epochs int) stepVerdict {
	var v stepVerdict
	total, switches, stops, blocks := meta[liveCount], meta[liveSwitch], meta[liveStop], meta[liveBlocked]
	switch {
	case total > 0:
		v.Apply = true
	case switches == 0 && stops == 0 && blocks == 0:
		v.EpochDone = true
		if epoch+1 >= epochs {
			v.Action = actDone
			return v
		}
	case blocks > 0 && switches == 0:
		v.Wait = true
	}
	switch {
	case stops > 0:
		v.Action = actStop
		return v
	case switches > 0:
		v.Action = actSwitch
		return v
	}
	leavers := 0
	for r := range world {
		if liveSlot(meta, r).Leaving {
			leavers++
		}
	}
	switch {
	case liveSlot(meta, rank).Leaving:
		v.Action = actLeave
	case leavers > 0:
		v.Action = actSwitch
	default:
		v.Action = actContinue
	}
	return v
}

// liveConsumption is every rank's consumption in an applied step, for the
// training state (the root's copy goes into reconcile: datapipe/doc.go,
// mechanism 1), and the step's debug record payload.
func liveConsumption(meta []int64, members []string, epoch int, debug bool) ([]datapipe.Consumption, string) {
	var out []datapipe.Consumption
	var dbg []byte
	if debug {
		dbg = strconv.AppendInt(dbg, int64(epoch), 10)
		dbg = append(dbg, '|')
	}
	for r := range members {
		s := liveSlot(meta, r)
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

// livePartition is partition p of an exec data set of samples samples in
// parts partitions: its first global sample index and its size (the
// built-in data set's layout, trainer.Dataset.Partition).
func livePartition(samples int64, parts, p int) (first, size int64) {
	n := int64(parts)
	first = samples * int64(p) / n
	return first, samples*int64(p+1)/n - first
}
