package trainer

import (
	"fmt"
	"math"
)

// Model is a multi-layer perceptron: ReLU hidden layers, a linear output
// layer and softmax cross-entropy. Its parameters live in one flat float32
// vector, layer by layer, each layer's weights (inputs x outputs, row-major)
// followed by its biases.
//
// A Model is not safe for concurrent use; Gradient and Loss reuse a workspace
// that grows to the largest batch seen and then stays.
type Model struct {
	cfg     ModelConfig
	dims    []int
	wOff    []int // offset of layer l's weights in params
	bOff    []int // offset of layer l's biases in params
	params  []float32
	threads int

	ws workspace
}

// NewModel builds a model with He-initialised weights and zero biases drawn
// from cfg.Seed: the same config gives the same parameters, bit for bit.
func NewModel(cfg ModelConfig) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Hidden = append([]int(nil), cfg.Hidden...)
	m := &Model{cfg: cfg, dims: cfg.Dims(), threads: max(cfg.Threads, 1)}
	layers := len(m.dims) - 1
	m.wOff = make([]int, layers)
	m.bOff = make([]int, layers)
	off := 0
	for l := range layers {
		m.wOff[l] = off
		off += m.dims[l] * m.dims[l+1]
		m.bOff[l] = off
		off += m.dims[l+1]
	}
	m.params = make([]float32, off)
	for l := range layers {
		g := splitmix{state: streamKey(cfg.Seed, domainModel, uint64(l))}
		std := heStd(m.dims[l])
		w := m.weights(l)
		for j := range w {
			w[j] = float32(g.uniform() * std)
		}
	}
	m.ws.init(m)
	return m, nil
}

// Config returns the model's configuration.
func (m *Model) Config() ModelConfig {
	c := m.cfg
	c.Hidden = append([]int(nil), c.Hidden...)
	return c
}

// Dims lists the layer widths: inputs, hidden..., classes.
func (m *Model) Dims() []int { return append([]int(nil), m.dims...) }

// NumParams is the length of the flat parameter vector.
func (m *Model) NumParams() int { return len(m.params) }

// Params is the flat parameter vector itself, not a copy: writes to it (an
// all-reduce, a broadcast, an optimizer step) change the model.
func (m *Model) Params() []float32 { return m.params }

func (m *Model) weights(l int) []float32 {
	return m.params[m.wOff[l] : m.wOff[l]+m.dims[l]*m.dims[l+1]]
}

func (m *Model) biases(l int) []float32 {
	return m.params[m.bOff[l] : m.bOff[l]+m.dims[l+1]]
}

// Gradient adds the sum over the n samples of the per-sample gradients of the
// cross-entropy loss to grad (len NumParams) and returns the sum of the
// per-sample losses. x holds n samples of Inputs features, row-major.
//
// Sums rather than means let workers with different batch sizes all-reduce
// their gradients and divide by the global sample count once.
func (m *Model) Gradient(x []float32, labels []int32, n int, grad []float32) (lossSum float64) {
	m.check(x, labels, n)
	if len(grad) != len(m.params) {
		panic(fmt.Sprintf("trainer: gradient length %d, want %d", len(grad), len(m.params)))
	}
	if n == 0 {
		return 0
	}
	m.forward(x, n)
	lossSum, _ = m.softmax(labels, n, true)
	m.backward(x, n, grad)
	return lossSum
}

// Loss returns the summed cross-entropy of n samples and how many of them
// the model classifies correctly (arg-max of the logits, lowest index on a tie).
func (m *Model) Loss(x []float32, labels []int32, n int) (lossSum float64, correct int) {
	m.check(x, labels, n)
	if n == 0 {
		return 0, 0
	}
	m.forward(x, n)
	return m.softmax(labels, n, false)
}

func (m *Model) check(x []float32, labels []int32, n int) {
	if n < 0 || len(x) < n*m.cfg.Inputs || len(labels) < n {
		panic(fmt.Sprintf("trainer: batch of %d needs %d features and %d labels, got %d and %d",
			n, n*m.cfg.Inputs, n, len(x), len(labels)))
	}
	for i, y := range labels[:n] {
		if y < 0 || int(y) >= m.cfg.Classes {
			panic(fmt.Sprintf("trainer: label %d of sample %d outside [0, %d)", y, i, m.cfg.Classes))
		}
	}
	m.ws.ensureBatch(m, n)
}

// softmax turns the logits of the last layer into per-sample losses and, when
// grad is set, writes dLoss/dlogits (softmax minus one-hot) into ws.dz.
// The log-sum-exp runs in float64 so the loss is accurate for any logits.
func (m *Model) softmax(labels []int32, n int, grad bool) (lossSum float64, correct int) {
	c := m.cfg.Classes
	logits := m.ws.acts[len(m.dims)-2]
	for i := range n {
		z := logits[i*c : (i+1)*c]
		best := 0
		for j, v := range z {
			if v > z[best] {
				best = j
			}
		}
		if best == int(labels[i]) {
			correct++
		}
		zmax := float64(z[best])
		var sum float64
		for _, v := range z {
			sum += math.Exp(float64(v) - zmax)
		}
		lossSum += math.Log(sum) + zmax - float64(z[labels[i]])
		if !grad {
			continue
		}
		dz := m.ws.dz[0][i*c : (i+1)*c]
		for j, v := range z {
			dz[j] = float32(math.Exp(float64(v)-zmax) / sum)
		}
		dz[labels[i]]--
	}
	return lossSum, correct
}
