package builtin

import (
	"context"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/edl-nomad/edl/worker/internal/workertest"
	"github.com/edl-nomad/edl/worker/trainer"
)

// TestEpochEndValidation: two workers train three epochs; rank 0 adds
// val_loss and val_accuracy at each epoch's end (epoch = epochs done, at
// that epoch's last applied step, after every loss point of the epoch),
// and the model gets better at the held-out set than it was at the start.
func TestEpochEndValidation(t *testing.T) {
	const epochs = 3
	spec := workertest.TestSpec(epochs, 2)
	spec.Workers.Max = 2
	r := testenv.NewRedis(t)
	c := workertest.NewCluster(t, r, spec, 0)
	c.Start()
	c.Start()
	c.Finish(60 * time.Second)
	pts, err := jobmetrics.New(r.Client, r.Prefix).Read(context.Background(), c.Job, "", 100000)
	if err != nil {
		t.Fatal(err)
	}
	var val []jobmetrics.Point
	lastLoss := map[int]int64{} // epoch -> its last step with a loss point
	for _, p := range pts {
		if _, ok := p.Values["loss"]; ok {
			lastLoss[p.Epoch] = max(lastLoss[p.Epoch], p.Step)
		}
		if _, ok := p.Values["val_loss"]; ok {
			val = append(val, p)
		}
	}
	if len(val) != epochs {
		t.Fatalf("%d validation points (%+v), want %d", len(val), val, epochs)
	}
	for i, p := range val {
		if p.Epoch != i+1 || p.Step != lastLoss[i] {
			t.Errorf("validation %d at step %d epoch %d, want epoch %d at step %d (the epoch's last)", i, p.Step, p.Epoch, i+1, lastLoss[i])
		}
		if a := p.Values["val_accuracy"]; a < 0 || a > 1 {
			t.Errorf("val_accuracy %v outside [0, 1]", a)
		}
	}
	// The untrained model's loss on the same held-out samples: training helped.
	data, err := trainer.NewDataset(spec.Trainer.Builtin.Dataset)
	if err != nil {
		t.Fatal(err)
	}
	m, err := trainer.NewModel(trainer.ModelConfigFrom(*spec.Trainer.Builtin))
	if err != nil {
		t.Fatal(err)
	}
	f := data.Features()
	x, labels := make([]float32, valSamples*f), make([]int32, valSamples)
	for i := range valSamples {
		labels[i] = data.HeldOut(int64(i), x[i*f:(i+1)*f])
	}
	sum, _ := m.Loss(x, labels, valSamples)
	initial := sum / valSamples
	last := val[len(val)-1].Values["val_loss"]
	t.Logf("held-out loss: initial %.4f, after each epoch %.4f %.4f %.4f", initial, val[0].Values["val_loss"], val[1].Values["val_loss"], last)
	if !(last < 0.9*initial) {
		t.Errorf("val_loss after %d epochs %.4f, want below 0.9x the untrained model's %.4f", epochs, last, initial)
	}
}
