//go:build !amd64 || purego

package trainer

func axpy4(y, x0, x1, x2, x3 []float32, a0, a1, a2, a3 float32) {
	axpy4Go(y, x0, x1, x2, x3, a0, a1, a2, a3)
}

func axpy1(y, x []float32, a float32) { axpy1Go(y, x, a) }

func dot4(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	return dot4Go(w, x0, x1, x2, x3)
}

func dot1(w, x []float32) float32 { return dot1Go(w, x) }

// Kernel names the inner loops in use.
func Kernel() string { return "go" }
