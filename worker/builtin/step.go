package builtin

import (
	"context"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// batchPlan is this rank's share of a step under the job's batch policy.
type batchPlan struct {
	local int     // samples this rank takes per step (local+1 at a partition's tail: core.ShareSize)
	lr    float32 // the SGD learning rate for steps of this world size
}

// planBatch: fixed_global splits the global batch over the world and keeps
// the learning rate; fixed_local keeps batch/initial per rank and scales the
// learning rate linearly with the world (lr * world/initial). The rate, not
// the gradient, is scaled: with momentum the two differ after a resize (the
// velocity carries gradients of the old scale).
func planBatch(bt *jobs.BuiltinTrainer, initial, world, rank int) batchPlan {
	initial = max(initial, 1)
	if bt.BatchPolicy == jobs.FixedLocal {
		return batchPlan{local: max(1, bt.BatchSize/initial), lr: float32(bt.LearningRate) * float32(world) / float32(initial)}
	}
	local := bt.BatchSize / world
	if rank < bt.BatchSize%world {
		local++
	}
	return batchPlan{local: max(1, local), lr: float32(bt.LearningRate)}
}

// train runs g's step loop until something ends it.
func (w *Worker) train(ctx context.Context, g *coord.Generation) (outcome, *coord.Generation) {
	rank, world := g.Rank(w.cfg.Worker), len(g.Members)
	np := w.ts.model.NumParams()
	plan := planBatch(w.bt, w.spec.Workers.Min, world, rank)
	w.mem.TrainedIn = g
	if need := np + 1 + core.BlockLen(world); cap(w.buf) < need {
		// Room for a few more ranks: a join does not reallocate 4 MB.
		w.buf = make([]float32, need, np+1+core.BlockLen(world+8))
	} else {
		w.buf = w.buf[:need]
	}
	feat := w.data.Features()
	if most := plan.local + 1; cap(w.x) < most*feat {
		// A partition's tail merges into its last batch (core.ShareSize):
		// a step takes up to plan.local+1 samples.
		w.x = make([]float32, most*feat)
		w.labels = make([]int32, most)
	}
	// The buffer: the gradient, the step's loss, the step block (block.go).
	grad, meta := w.buf[:np], w.buf[np:]
	block := meta[1:]
	for {
		clear(w.buf)
		// A joiner whose state is still on its way takes part with nothing.
		pending := w.ts.pending != nil
		var blocked, stale bool
		if !pending {
			// Flush before claim, asOf = the last applied step (datapipe/doc.go).
			blocked, stale = w.dc.Claim(ctx, w.cfg.RingTimeout/2, g.Number, w.ts.st.Epoch, w.ts.st.Applied)
		}
		w.sw.mark("claim")
		my := core.Slot{Part: -1, Leaving: w.mem.LeaveReq.Load()}
		var loss float64
		n := 0
		computeStart := time.Now()
		if w.dc.Cur.Part >= 0 && !pending {
			w.ids = w.data.PartitionSamples(w.ts.st.Epoch, w.dc.Cur.Part, w.dc.Cur.Off, core.ShareSize(w.dc.Left(), plan.local), w.ids)
			n = len(w.ids)
			w.data.Batch(w.ids, w.x[:n*feat], w.labels[:n])
			loss = w.ts.model.Gradient(w.x[:n*feat], w.labels[:n], n, grad)
			my = w.dc.Take(n, my.Leaving)
		}
		w.sw.mark("gradient")
		if w.cfg.StepDelay > 0 {
			time.Sleep(w.cfg.StepDelay)
		}
		if n > 0 {
			// Compute only (StepDelay counts: it stands for a slow device).
			w.speed.observe(time.Since(computeStart), g.Number, len(g.Members))
		}
		meta[0] = float32(loss)
		block[core.BlockCount] = float32(n)
		if stale || max(w.dc.SeenGen(), w.mem.Watch.Latest()) > g.Number {
			block[core.BlockSwitch] = 1
		}
		if w.mem.StopReq.Load() {
			block[core.BlockStop] = 1
		}
		if blocked {
			block[core.BlockBlocked] = 1
		}
		core.PutSlot(block, rank, my)
		if err := w.ring.AllReduceExactTail(ctx, w.buf, len(meta)); err != nil { // the metadata never in fp16
			w.log.Warn("all-reduce failed; step discarded", "gen", g.Number, "step", w.ts.st.Applied+1, "err", err)
			return outFailed, nil
		}
		w.sw.mark("allreduce")
		if pending {
			if err := w.ts.takePending(ctx); err != nil {
				// The others applied this step; this worker cannot: break the ring.
				w.log.Warn("state hand-over failed after the first step", "gen", g.Number, "err", err)
				return outFailed, nil
			}
			w.dc.Restart() // claim again as of the state's step
		}
		// The decision is live mode's (decideStep): the same block, read
		// as integers, gives the same verdict on every member.
		w.exact = core.ExactBlock(block, world, w.exact)
		v := core.DecideStep(w.exact, world, rank, w.ts.st.Epoch, w.bt.Epochs)
		if v.Apply {
			w.apply(g, rank, world, plan, grad, meta[0], w.exact)
			if d := w.sw.end(w.log, g.Number); d > 0 && rank == 0 {
				// The switch's cost as this member timed it: from the step
				// that decided it to the first step applied in g (the
				// API's edl_resize_stall_seconds).
				w.rep.Event(jobs.EventWorker, fmt.Sprintf("generation %d running: the switch took %d ms", g.Number, d.Milliseconds()),
					map[string]any{"generation": g.Number, "world": world, "stall_ms": d.Milliseconds()})
			}
			if rank == 0 && w.ck.due(w.ts.st.Applied) {
				w.ck.take(ctx, g.Number, world, false)
			}
		}
		if v.EpochDone {
			w.log.Info("epoch done", "epoch", w.ts.st.Epoch, "step", w.ts.st.Applied)
			w.ts.st.Epoch++
			w.dc.Restart()
			if rank == 0 {
				w.validate() // val_loss of this epoch's model (validate.go)
			}
			if v.Action == core.ActDone {
				return outDone, nil // finish takes the final checkpoint
			}
			if rank == 0 {
				w.ck.take(ctx, g.Number, world, false)
			}
		}
		if v.Wait {
			time.Sleep(20 * time.Millisecond) // someone cannot reach Redis; do not spin
		}
		switch v.Action {
		case core.ActStop:
			return outStop, nil
		case core.ActLeave:
			if rank == 0 && core.AllLeaving(w.exact, world) {
				// Every worker stops: keep the state for whoever comes next.
				w.ck.take(ctx, g.Number, world, true)
			}
			return outLeave, nil
		case core.ActSwitch:
			voted := w.exact[core.BlockSwitch] > 0 // not a leaver's switch: timed
			if voted {
				w.sw.begin()
			}
			next, done := w.mem.NextGen(ctx, g.Number)
			if voted {
				w.sw.mark("gen_read")
			}
			if done {
				return outDone, nil
			}
			return outSwitch, next
		}
	}
}

// apply takes the summed gradient as one applied step: the update, the
// counters and every rank's consumption (m: the step's block, exactBlock;
// loss: the sum of the per-sample losses), this rank's commit.
func (w *Worker) apply(g *coord.Generation, rank, world int, plan batchPlan, grad []float32, loss float32, m []int64) {
	total := int(m[core.BlockCount])
	w.ts.update(grad, total, plan.lr)
	cons, dbg := core.Consumption(m, g.Members, w.ts.st.Epoch, w.cfg.DebugSamples)
	w.ts.st.Advance(int64(total), float64(loss), cons, dbg)
	var debug []datapipe.DebugRecord
	if w.cfg.DebugSamples {
		debug = append(debug, datapipe.DebugRecord{Step: w.ts.st.Applied, Payload: w.ts.st.Debug})
	}
	w.dc.Applied(g.Number, w.ts.st.Applied, w.ts.st.Epoch, core.ReadSlot(m, rank), debug...)
	now := w.deps.Now()
	if w.deps.StepLog != nil {
		fmt.Fprintf(w.deps.StepLog, "%d %d %d %d %d %.6f\n", now.UnixNano(), w.ts.st.Applied, g.Number, world, w.ts.st.Epoch, w.ts.st.Loss)
	}
	if rank == 0 {
		rate := w.rate.Step(now, g.Number, int64(total))
		w.rep.Progress(jobs.Progress{Epoch: w.ts.st.Epoch, Step: w.ts.st.Applied, Samples: w.ts.st.Samples, Loss: w.ts.st.Loss,
			SamplesPerS: rate, WorldSize: world, Generation: g.Number, TotalEpochs: w.bt.Epochs})
		w.met.Add(w.ts.st.Applied, w.ts.st.Epoch, map[string]float64{jobs.MetricLoss: w.ts.st.Loss})
	}
}
