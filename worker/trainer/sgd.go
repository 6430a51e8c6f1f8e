package trainer

import "fmt"

// SGD is stochastic gradient descent with momentum in the form PyTorch uses:
//
//	v = Momentum*v + g
//	p = p - LR*v
//
// so a run here and a torch.optim.SGD run with the same settings agree.
type SGD struct {
	LR       float32
	Momentum float32
	Velocity []float32
}

// NewSGD returns an optimizer for n parameters with zero velocity.
func NewSGD(n int, lr, momentum float32) *SGD {
	return &SGD{LR: lr, Momentum: momentum, Velocity: make([]float32, n)}
}

// Step applies one update; grad is the averaged gradient.
func (o *SGD) Step(params, grad []float32) {
	if len(params) != len(o.Velocity) || len(grad) != len(o.Velocity) {
		panic(fmt.Sprintf("trainer: SGD step with %d params and %d grads, want %d",
			len(params), len(grad), len(o.Velocity)))
	}
	lr, mu := o.LR, o.Momentum
	v := o.Velocity[:len(params)]
	g := grad[:len(params)]
	for j := range params {
		vj := mu*v[j] + g[j]
		v[j] = vj
		params[j] -= lr * vj
	}
}
