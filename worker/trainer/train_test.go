package trainer

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// trainRun trains a small model on partitions [0, trainParts) of the data set
// and returns the model, its optimizer and the mean loss of each epoch.
func trainRun(t *testing.T, epochs, trainParts, batch int) (*Model, *SGD, *Dataset, []float64) {
	t.Helper()
	d := mustDataset(t, spec(11, 10000, 16, 4, 10))
	m := mustModel(t, ModelConfig{Inputs: 16, Hidden: []int{64, 64}, Classes: 4, Seed: 11})
	o := NewSGD(m.NumParams(), 0.05, 0.9)
	grad := make([]float32, m.NumParams())
	x, labels := make([]float32, batch*16), make([]int32, batch)
	var ids []int64
	var losses []float64
	for epoch := range epochs {
		var sum float64
		var seen int
		for p := range trainParts {
			_, count := d.Partition(p)
			for off := int64(0); off < count; off += int64(batch) {
				ids = d.PartitionSamples(epoch, p, off, batch, ids)
				d.Batch(ids, x, labels)
				clear(grad)
				sum += m.Gradient(x, labels, len(ids), grad)
				seen += len(ids)
				inv := 1 / float32(len(ids))
				for j := range grad {
					grad[j] *= inv
				}
				o.Step(m.Params(), grad)
			}
		}
		losses = append(losses, sum/float64(seen))
	}
	return m, o, d, losses
}

func evaluate(m *Model, d *Dataset, parts []int) (loss, accuracy float64) {
	var sum float64
	var correct, n int
	x := make([]float32, d.Features())
	var label [1]int32
	for _, p := range parts {
		first, count := d.Partition(p)
		for id := first; id < first+count; id++ {
			label[0] = d.Sample(id, x)
			l, c := m.Loss(x, label[:], 1)
			sum += l
			correct += c
			n++
		}
	}
	return sum / float64(n), float64(correct) / float64(n)
}

func TestTrainingLearnsTheTeacher(t *testing.T) {
	m, _, d, losses := trainRun(t, 4, 8, 32)
	held := []int{8, 9} // never trained on
	startLoss, startAcc := evaluate(mustModel(t, m.Config()), d, held)
	loss, acc := evaluate(m, d, held)
	t.Logf("held-out loss %.4f -> %.4f, accuracy %.3f -> %.3f; train loss per epoch %.4f",
		startLoss, loss, startAcc, acc, losses)
	if startAcc > 0.5 {
		t.Errorf("untrained accuracy %.3f: the task is too easy to show learning", startAcc)
	}
	if loss > startLoss/2.5 {
		t.Errorf("held-out loss %.4f -> %.4f, want it cut by 2.5x or more", startLoss, loss)
	}
	if acc < 0.8 {
		t.Errorf("held-out accuracy %.3f, want >= 0.8 (chance is 0.25)", acc)
	}
	for e := 1; e < len(losses); e++ {
		if losses[e] >= losses[e-1] {
			t.Errorf("epoch %d: training loss %.4f did not fall from %.4f", e, losses[e], losses[e-1])
		}
	}
}

func TestTrainingIsDeterministic(t *testing.T) {
	m1, o1, _, l1 := trainRun(t, 1, 3, 16)
	m2, o2, _, l2 := trainRun(t, 1, 3, 16)
	if !slices.Equal(l1, l2) || !slices.Equal(m1.Params(), m2.Params()) || !slices.Equal(o1.Velocity, o2.Velocity) {
		t.Fatal("two runs from one seed differ")
	}
	other := mustModel(t, ModelConfig{Inputs: 16, Hidden: []int{64, 64}, Classes: 4, Seed: 12})
	if slices.Equal(other.Params(), mustModel(t, m1.Config()).Params()) {
		t.Fatal("another seed gave the same initial parameters")
	}
}

func TestStateRoundTrip(t *testing.T) {
	m, o, _, _ := trainRun(t, 1, 1, 16)
	b := m.MarshalState(o)

	n := mustModel(t, ModelConfig{Inputs: 16, Hidden: []int{64, 64}, Classes: 4, Seed: 99})
	p := NewSGD(n.NumParams(), 0.1, 0.5)
	if err := n.UnmarshalState(b, p); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Params(), m.Params()) || !slices.Equal(p.Velocity, o.Velocity) {
		t.Fatal("parameters or velocity changed in the round trip")
	}
	s, err := DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Dims, []int{16, 64, 64, 4}) || !slices.Equal(s.Params, m.Params()) || !slices.Equal(s.Velocity, o.Velocity) {
		t.Fatalf("decoded state: dims %v, params equal %v", s.Dims, slices.Equal(s.Params, m.Params()))
	}
	noVel, err := DecodeState(m.MarshalState(nil))
	if err != nil || noVel.Velocity != nil {
		t.Fatalf("state without velocity: %v, velocity %v", err, noVel.Velocity)
	}
	if err := n.UnmarshalState(m.MarshalState(nil), p); err != nil || slices.ContainsFunc(p.Velocity, func(v float32) bool { return v != 0 }) {
		t.Fatalf("loading a state without velocity: %v, velocity not zeroed", err)
	}

	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrStateFormat},
		{"truncated", b[:len(b)-1], ErrStateFormat},
		{"flipped bit", flip(b, len(b)/2), ErrStateFormat},
		{"bad version", flip(b, 4), ErrStateFormat},
		{"other shape", mustModel(t, ModelConfig{Inputs: 16, Hidden: []int{64, 32}, Classes: 4}).MarshalState(nil), ErrStateShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(n.Params())
			if err := n.UnmarshalState(tc.b, nil); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !slices.Equal(before, n.Params()) {
				t.Fatal("a rejected state changed the model")
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := slices.Clone(b)
	c[i] ^= 1
	return c
}

func TestLossMatchesGradient(t *testing.T) {
	m := mustModel(t, ModelConfig{Inputs: 8, Hidden: []int{16}, Classes: 3, Seed: 4})
	x, labels := randomBatch(4, 10, 8, 3)
	loss, correct := m.Loss(x, labels, 10)
	if g := m.Gradient(x, labels, 10, make([]float32, m.NumParams())); g != loss {
		t.Fatalf("Loss %v, Gradient's loss %v", loss, g)
	}
	if correct < 0 || correct > 10 || math.IsNaN(loss) || loss <= 0 {
		t.Fatalf("loss %v correct %d", loss, correct)
	}
}
