package trainer

import (
	"math"
	"testing"
)

// ref64 is an independent float64 implementation of the model's loss, used
// to check both the forward pass and, by central differences, the gradient.
func ref64(dims []int, p []float64, x []float32, labels []int32, n int) float64 {
	var loss float64
	for i := range n {
		in := make([]float64, dims[0])
		for k := range in {
			in[k] = float64(x[i*dims[0]+k])
		}
		off := 0
		for l := 0; l+1 < len(dims); l++ {
			din, dout := dims[l], dims[l+1]
			out := make([]float64, dout)
			for j := range out {
				out[j] = p[off+din*dout+j]
			}
			for k := range din {
				for j := range dout {
					out[j] += in[k] * p[off+k*dout+j]
				}
			}
			off += din*dout + dout
			if l+2 < len(dims) {
				for j, v := range out {
					out[j] = max(v, 0)
				}
			}
			in = out
		}
		zmax := math.Inf(-1)
		for _, v := range in {
			zmax = max(zmax, v)
		}
		var s float64
		for _, v := range in {
			s += math.Exp(v - zmax)
		}
		loss += math.Log(s) + zmax - in[labels[i]]
	}
	return loss
}

func randomBatch(seed int64, n, f, classes int) ([]float32, []int32) {
	g := splitmix{state: uint64(seed)}
	x := make([]float32, n*f)
	for j := range x {
		x[j] = float32(g.uniform())
		if g.next()%7 == 0 {
			x[j] = 0 // exercise the sparse paths on the input layer too
		}
	}
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(g.next() % uint64(classes))
	}
	return x, labels
}

func TestGradientFiniteDifference(t *testing.T) {
	tests := []struct {
		name   string
		cfg    ModelConfig
		n      int
		checks int // parameters checked, spread over the vector; 0 = all
	}{
		{"one hidden", ModelConfig{Inputs: 5, Hidden: []int{7}, Classes: 3, Seed: 1}, 6, 0},
		{"two hidden odd batch", ModelConfig{Inputs: 9, Hidden: []int{11, 6}, Classes: 4, Seed: 2}, 7, 0},
		{"no hidden", ModelConfig{Inputs: 4, Classes: 2, Seed: 3}, 3, 0},
		{"past the block sizes", ModelConfig{Inputs: 300, Hidden: []int{270, 5}, Classes: 3, Seed: 4}, 5, 60},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewModel(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Non-zero biases so their gradients and the ReLU masks are generic.
			g := splitmix{state: 99}
			for l := range len(m.dims) - 1 {
				for j := range m.biases(l) {
					m.biases(l)[j] = float32(g.uniform() * 0.1)
				}
			}
			x, labels := randomBatch(tc.cfg.Seed, tc.n, tc.cfg.Inputs, tc.cfg.Classes)
			grad := make([]float32, m.NumParams())
			loss := m.Gradient(x, labels, tc.n, grad)

			p64 := make([]float64, m.NumParams())
			for j, v := range m.Params() {
				p64[j] = float64(v)
			}
			if want := ref64(m.dims, p64, x, labels, tc.n); math.Abs(loss-want) > 1e-4*math.Abs(want) {
				t.Fatalf("loss %v, float64 reference %v", loss, want)
			}
			stride := 1
			if tc.checks > 0 {
				stride = max(m.NumParams()/tc.checks, 1)
			}
			const eps = 1e-5
			bad := 0
			for j := 0; j < len(p64); j += stride {
				orig := p64[j]
				p64[j] = orig + eps
				up := ref64(m.dims, p64, x, labels, tc.n)
				p64[j] = orig - eps
				down := ref64(m.dims, p64, x, labels, tc.n)
				p64[j] = orig
				num := (up - down) / (2 * eps)
				if diff := math.Abs(float64(grad[j]) - num); diff > 1e-3*max(1, math.Abs(num)) {
					bad++
					if bad <= 5 {
						t.Errorf("param %d: analytic %v, numeric %v", j, grad[j], num)
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d parameters disagree", bad)
			}
		})
	}
}

func TestGradientAdds(t *testing.T) {
	m := mustModel(t, ModelConfig{Inputs: 6, Hidden: []int{8}, Classes: 3, Seed: 5})
	x, labels := randomBatch(5, 4, 6, 3)
	once := make([]float32, m.NumParams())
	l1 := m.Gradient(x, labels, 4, once)
	twice := make([]float32, m.NumParams())
	m.Gradient(x, labels, 4, twice)
	l2 := m.Gradient(x, labels, 4, twice)
	if l1 != l2 {
		t.Fatalf("loss changed between calls: %v then %v", l1, l2)
	}
	for j := range once {
		if d := math.Abs(float64(twice[j] - 2*once[j])); d > 1e-6*max(1, math.Abs(float64(once[j]))) {
			t.Fatalf("grad[%d]: two calls gave %v, want 2*%v", j, twice[j], once[j])
		}
	}
}

// The property elastic training rests on: the gradient of a batch is the sum
// of the gradients of any split of it, so workers with different shares
// all-reduce to the same update.
func TestGradientSplitSums(t *testing.T) {
	cfg := ModelConfig{Inputs: 40, Hidden: []int{64, 32}, Classes: 5, Seed: 6}
	m := mustModel(t, cfg)
	const n = 37
	x, labels := randomBatch(6, n, cfg.Inputs, cfg.Classes)
	whole := make([]float32, m.NumParams())
	lossWhole := m.Gradient(x, labels, n, whole)
	for _, cut := range []int{1, 16, 20, 36} {
		parts := make([]float32, m.NumParams())
		lossA := m.Gradient(x[:cut*cfg.Inputs], labels[:cut], cut, parts)
		lossB := m.Gradient(x[cut*cfg.Inputs:], labels[cut:], n-cut, parts)
		if d := math.Abs(lossA + lossB - lossWhole); d > 1e-9*lossWhole {
			t.Errorf("cut %d: loss %v + %v != %v", cut, lossA, lossB, lossWhole)
		}
		var worst float64
		for j := range whole {
			d := math.Abs(float64(parts[j]-whole[j])) / max(1, math.Abs(float64(whole[j])))
			worst = max(worst, d)
		}
		if worst > 1e-5 {
			t.Errorf("cut %d: split gradient differs from whole by %v (relative)", cut, worst)
		}
	}
}

func TestThreadsGiveIdenticalResults(t *testing.T) {
	cfg := ModelConfig{Inputs: 70, Hidden: []int{300, 45}, Classes: 7, Seed: 8}
	x, labels := randomBatch(8, 19, cfg.Inputs, cfg.Classes)
	var want []float32
	var wantLoss float64
	for _, threads := range []int{1, 2, 3, 8} {
		cfg.Threads = threads
		m := mustModel(t, cfg)
		grad := make([]float32, m.NumParams())
		loss := m.Gradient(x, labels, 19, grad)
		if want == nil {
			want, wantLoss = grad, loss
			continue
		}
		if loss != wantLoss {
			t.Errorf("threads %d: loss %v, want %v", threads, loss, wantLoss)
		}
		for j := range want {
			if grad[j] != want[j] {
				t.Fatalf("threads %d: grad[%d] = %v, want %v", threads, j, grad[j], want[j])
			}
		}
	}
}

func TestGradientAllocatesNothing(t *testing.T) {
	m := mustModel(t, ModelConfig{Inputs: 32, Hidden: []int{64, 64}, Classes: 10, Seed: 9})
	x, labels := randomBatch(9, 16, 32, 10)
	grad := make([]float32, m.NumParams())
	o := NewSGD(m.NumParams(), 0.01, 0.9)
	m.Gradient(x, labels, 16, grad) // grows the workspace
	allocs := testing.AllocsPerRun(20, func() {
		clear(grad)
		m.Gradient(x, labels, 16, grad)
		m.Gradient(x, labels, 5, grad) // smaller batches reuse it
		m.Loss(x, labels, 16)
		o.Step(m.Params(), grad)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per step, want 0", allocs)
	}
}

func mustModel(t testing.TB, cfg ModelConfig) *Model {
	t.Helper()
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
