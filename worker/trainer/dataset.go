package trainer

import (
	"fmt"
	"math"

	"github.com/edl-nomad/edl/jobs"
)

// TeacherHidden is the width of the teacher network's hidden layer.
const TeacherHidden = 32

// MaxFeatures bounds the features per sample.
const MaxFeatures = 1 << 20

// Dataset is a labelled synthetic data set: sample i's features are uniform
// values drawn from the stream (Seed, i), and its label is what a fixed random
// teacher network, drawn from Seed, answers for them. Any worker can produce
// any sample without the others; a Dataset is safe for concurrent use.
type Dataset struct {
	spec jobs.SyntheticDataset
	w1   []float64 // Features x TeacherHidden
	b1   []float64 // TeacherHidden
	w2   []float64 // TeacherHidden x Classes
}

// ValidateDataset reports the first field of d at fault.
func ValidateDataset(d jobs.SyntheticDataset) error {
	switch {
	case d.Samples <= 0:
		return fmt.Errorf("dataset samples: %d, want > 0", d.Samples)
	case d.Features <= 0 || d.Features > MaxFeatures:
		return fmt.Errorf("dataset features: %d, want 1..%d", d.Features, MaxFeatures)
	case d.Classes < 2 || d.Classes > 1<<16:
		return fmt.Errorf("dataset classes: %d, want 2..65536", d.Classes)
	case d.Partitions <= 0 || d.Partitions > d.Samples:
		return fmt.Errorf("dataset partitions: %d, want 1..samples (%d)", d.Partitions, d.Samples)
	}
	return nil
}

// NewDataset validates d and draws its teacher.
func NewDataset(d jobs.SyntheticDataset) (*Dataset, error) {
	if err := ValidateDataset(d); err != nil {
		return nil, err
	}
	ds := &Dataset{
		spec: d,
		w1:   make([]float64, d.Features*TeacherHidden),
		b1:   make([]float64, TeacherHidden),
		w2:   make([]float64, TeacherHidden*d.Classes),
	}
	g := splitmix{state: streamKey(d.Seed, domainTeacher, 0)}
	// Unit-variance inputs through weights of variance 1/Features give
	// hidden pre-activations of unit variance, so the hard tanh below is
	// neither all linear nor all saturated.
	s1 := 1 / math.Sqrt(float64(d.Features)) // correctly rounded everywhere
	for j := range ds.w1 {
		ds.w1[j] = g.uniform() * s1
	}
	for j := range ds.b1 {
		ds.b1[j] = g.uniform() * 0.25
	}
	for j := range ds.w2 {
		ds.w2[j] = g.uniform()
	}
	return ds, nil
}

// Samples is the number of samples.
func (d *Dataset) Samples() int64 { return int64(d.spec.Samples) }

// Features is the number of features per sample.
func (d *Dataset) Features() int { return d.spec.Features }

// Sample writes the features of sample id into x[:Features] and returns its
// label. The teacher is h = hardtanh(x W1 + b1), label = argmax(h W2), lowest
// class on a tie; it runs in float64 with every product rounded before it is
// added, so the label is the same on every platform.
func (d *Dataset) Sample(id int64, x []float32) int32 {
	if id < 0 || id >= int64(d.spec.Samples) {
		panic(fmt.Sprintf("trainer: sample %d outside [0, %d)", id, d.spec.Samples))
	}
	return d.draw(splitmix{state: streamKey(d.spec.Seed, domainSample, uint64(id))}, x)
}

// HeldOut writes the features of held-out sample i (any i >= 0) into
// x[:Features] and returns its label: drawn from a stream of its own, so
// never a training sample, and labelled by the same teacher; a
// validation set of the same distribution.
func (d *Dataset) HeldOut(i int64, x []float32) int32 {
	if i < 0 {
		panic(fmt.Sprintf("trainer: held-out sample %d < 0", i))
	}
	return d.draw(splitmix{state: streamKey(d.spec.Seed, domainHeldOut, uint64(i))}, x)
}

// draw draws a sample's features from g and labels them.
func (d *Dataset) draw(g splitmix, x []float32) int32 {
	f := d.spec.Features
	x = x[:f]
	for j := 0; j < f; j += 2 {
		a, b := g.uniformPair()
		x[j] = float32(a)
		if j+1 < f {
			x[j+1] = float32(b)
		}
	}
	var h [TeacherHidden]float64
	copy(h[:], d.b1)
	for j, v := range x {
		xv := float64(v)
		w := d.w1[j*TeacherHidden : (j+1)*TeacherHidden]
		for t := range h {
			h[t] += float64(xv * w[t])
		}
	}
	for t, v := range h {
		h[t] = min(max(v, -1), 1)
	}
	c := d.spec.Classes
	best, bestV := 0, 0.0
	for k := range c {
		var z float64
		for t, v := range h {
			z += float64(v * d.w2[t*c+k])
		}
		if k == 0 || z > bestV {
			best, bestV = k, z
		}
	}
	return int32(best)
}

// Batch fills x (len(ids) x Features) and labels with the samples ids.
func (d *Dataset) Batch(ids []int64, x []float32, labels []int32) {
	f := d.spec.Features
	for i, id := range ids {
		labels[i] = d.Sample(id, x[i*f:(i+1)*f])
	}
}
