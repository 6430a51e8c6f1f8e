//go:build amd64 && !purego

package trainer

import "golang.org/x/sys/cpu"

// useAVX2 picks the assembly kernels (8-wide fused multiply-add). They round
// once per multiply-add where the Go loops round twice, so gradients differ
// from the pure Go build in the last bits; every element is still computed
// by the same sequence of operations whatever the batch split or thread count.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func axpy4AVX2(y, x0, x1, x2, x3 []float32, a0, a1, a2, a3 float32)

//go:noescape
func dot4AVX2(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32)

//go:noescape
func dot1AVX2(w, x []float32) float32

func axpy4(y, x0, x1, x2, x3 []float32, a0, a1, a2, a3 float32) {
	if !useAVX2 {
		axpy4Go(y, x0, x1, x2, x3, a0, a1, a2, a3)
		return
	}
	// The reslices are the bounds check the assembly does not do.
	axpy4AVX2(y, x0[:len(y)], x1[:len(y)], x2[:len(y)], x3[:len(y)], a0, a1, a2, a3)
}

func axpy1(y, x []float32, a float32) {
	if !useAVX2 {
		axpy1Go(y, x, a)
		return
	}
	x = x[:len(y)]
	axpy4AVX2(y, x, x, x, x, a, 0, 0, 0)
}

func dot4(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	if !useAVX2 {
		return dot4Go(w, x0, x1, x2, x3)
	}
	return dot4AVX2(w, x0[:len(w)], x1[:len(w)], x2[:len(w)], x3[:len(w)])
}

func dot1(w, x []float32) float32 {
	if !useAVX2 {
		return dot1Go(w, x)
	}
	return dot1AVX2(w, x[:len(w)])
}

// Kernel names the inner loops in use.
func Kernel() string {
	if useAVX2 {
		return "avx2-fma"
	}
	return "go"
}
