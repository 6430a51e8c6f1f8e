package builtin

import (
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// At every epoch's end rank 0 measures its model on a held-out set (the
// data set's HeldOut samples: never trained on, labelled by the same
// teacher) and adds val_loss (the mean cross-entropy) and val_accuracy to
// the job's metric log at the epoch's last applied step, with the epochs
// done as its epoch: what a sweep with scheduler.unit "epochs" judges.

const (
	valSamples   = 512     // held-out samples, fewer for wide features:
	valMaxFloats = 1 << 22 // at most this many features kept (16 MiB)
)

// heldOut is the validation set, drawn once.
type heldOut struct {
	x      []float32
	labels []int32
	n      int
}

func (w *Worker) heldOut() *heldOut {
	if w.val != nil {
		return w.val
	}
	f := w.data.Features()
	n := max(1, min(valSamples, valMaxFloats/f))
	h := &heldOut{x: make([]float32, n*f), labels: make([]int32, n), n: n}
	for i := range n {
		h.labels[i] = w.data.HeldOut(int64(i), h.x[i*f:(i+1)*f])
	}
	w.val = h
	return h
}

// validate reports the model's loss and accuracy on the held-out set.
func (w *Worker) validate() {
	start := time.Now()
	h := w.heldOut()
	sum, correct := w.ts.model.Loss(h.x, h.labels, h.n)
	loss, acc := sum/float64(h.n), float64(correct)/float64(h.n)
	w.met.Add(w.ts.st.Applied, w.ts.st.Epoch, map[string]float64{jobs.MetricValLoss: loss, jobs.MetricValAccuracy: acc})
	w.log.Info("validation", "epochs_done", w.ts.st.Epoch, "step", w.ts.st.Applied, "val_loss", loss, "val_accuracy", acc,
		"samples", h.n, "took", time.Since(start).Round(time.Microsecond))
}
