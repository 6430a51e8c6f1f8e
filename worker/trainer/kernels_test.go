package trainer

import (
	"math"
	"testing"
)

// The dispatching kernels (assembly where the CPU has it) must agree with the
// plain Go loops on every length, including the 16-, 8- and 1-wide tails.
func TestKernelsAgreeWithGo(t *testing.T) {
	t.Logf("kernel: %s", Kernel())
	g := splitmix{state: 7}
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(g.uniform())
		}
		return v
	}
	near := func(got, want float32, scale float64) bool {
		return math.Abs(float64(got-want)) <= 1e-5*max(1, scale)
	}
	for n := range 70 {
		y, x0, x1, x2, x3 := vec(n), vec(n+3), vec(n), vec(n+1), vec(n)
		a := vec(4)
		want := append([]float32(nil), y...)
		got := append([]float32(nil), y...)
		axpy4Go(want, x0, x1, x2, x3, a[0], a[1], a[2], a[3])
		axpy4(got, x0, x1, x2, x3, a[0], a[1], a[2], a[3])
		for j := range want {
			if !near(got[j], want[j], 1) {
				t.Fatalf("axpy4 n=%d [%d]: %v, want %v", n, j, got[j], want[j])
			}
		}
		axpy1Go(want, x2, a[0])
		axpy1(got, x2, a[0])
		for j := range want {
			if !near(got[j], want[j], 1) {
				t.Fatalf("axpy1 n=%d [%d]: %v, want %v", n, j, got[j], want[j])
			}
		}
		w0, w1, w2, w3 := dot4Go(y, x0, x1, x2, x3)
		s0, s1, s2, s3 := dot4(y, x0, x1, x2, x3)
		for k, p := range [][2]float32{{s0, w0}, {s1, w1}, {s2, w2}, {s3, w3}} {
			if !near(p[0], p[1], float64(n)) {
				t.Fatalf("dot4 n=%d sum %d: %v, want %v", n, k, p[0], p[1])
			}
		}
		// dot1 must equal the matching lane of dot4 exactly: which of the two
		// computes a product depends on the batch split.
		if d := dot1(y, x2); d != s2 {
			t.Fatalf("dot1 n=%d: %v, dot4 gave %v", n, d, s2)
		}
	}
}
