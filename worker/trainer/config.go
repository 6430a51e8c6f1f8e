package trainer

import (
	"errors"
	"fmt"

	"github.com/edl-nomad/edl/jobs"
)

// MaxParams bounds the model size; it keeps every offset an int32-safe int
// and the state format's sizes in uint32.
const MaxParams = 1 << 30

// ModelConfig is the shape of the perceptron and the seed of its initial
// parameters.
type ModelConfig struct {
	Inputs  int   // features per sample
	Hidden  []int // widths of the ReLU hidden layers, input side first
	Classes int   // outputs (softmax classes)
	Seed    int64 // initial parameters are a pure function of Seed and the shape
	// Threads is how many goroutines one Gradient or Loss call uses; 0 means
	// 1. Results do not depend on it: every output element is computed by
	// the same sequence of operations whatever the split.
	Threads int
}

// ModelConfigFrom takes the model's shape from a job's built-in trainer: the
// inputs and classes come from the data set, the hidden widths from the model.
func ModelConfigFrom(spec jobs.BuiltinTrainer) ModelConfig {
	return ModelConfig{
		Inputs:  spec.Dataset.Features,
		Hidden:  append([]int(nil), spec.Model.Hidden...),
		Classes: spec.Dataset.Classes,
		Seed:    spec.Dataset.Seed,
		Threads: 1,
	}
}

// Dims lists the layer widths: inputs, hidden..., classes.
func (c ModelConfig) Dims() []int {
	d := make([]int, 0, len(c.Hidden)+2)
	d = append(d, c.Inputs)
	d = append(d, c.Hidden...)
	return append(d, c.Classes)
}

// NumParams is the length of the flat parameter vector for this shape, or -1
// when it exceeds MaxParams.
func (c ModelConfig) NumParams() int {
	d := c.Dims()
	n := 0
	for l := 0; l+1 < len(d); l++ {
		if d[l] <= 0 || d[l+1] <= 0 || d[l] > MaxParams || d[l+1] > MaxParams {
			return -1
		}
		n += d[l]*d[l+1] + d[l+1]
		if n > MaxParams {
			return -1
		}
	}
	return n
}

// Validate reports the first field at fault.
func (c ModelConfig) Validate() error {
	if c.Inputs <= 0 {
		return fmt.Errorf("model inputs: %d, want > 0", c.Inputs)
	}
	if c.Classes < 2 {
		return fmt.Errorf("model classes: %d, want >= 2", c.Classes)
	}
	for i, h := range c.Hidden {
		if h <= 0 {
			return fmt.Errorf("model hidden[%d]: %d, want > 0", i, h)
		}
	}
	if c.Threads < 0 {
		return fmt.Errorf("model threads: %d, want >= 0", c.Threads)
	}
	if c.NumParams() < 0 {
		return errors.New("model: more than MaxParams parameters")
	}
	return nil
}
