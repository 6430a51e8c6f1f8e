package trainer

// The inner loops of the three matrix products. Each is written over one
// contiguous row so that the loads stream and the compiler drops the bounds
// checks; the "4" variants share one pass over y (or w) among four rows,
// which quarters the memory traffic of the row that is reused.

// axpy4Go adds a0*x0 + a1*x1 + a2*x2 + a3*x3 to y.
func axpy4Go(y, x0, x1, x2, x3 []float32, a0, a1, a2, a3 float32) {
	x0 = x0[:len(y)]
	x1 = x1[:len(y)]
	x2 = x2[:len(y)]
	x3 = x3[:len(y)]
	for j := range y {
		y[j] += a0*x0[j] + a1*x1[j] + a2*x2[j] + a3*x3[j]
	}
}

// axpy1Go adds a*x to y.
func axpy1Go(y, x []float32, a float32) {
	x = x[:len(y)]
	for j := range y {
		y[j] += a * x[j]
	}
}

// dot4Go returns the dot products of w with x0..x3.
func dot4Go(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	x0 = x0[:len(w)]
	x1 = x1[:len(w)]
	x2 = x2[:len(w)]
	x3 = x3[:len(w)]
	for j, v := range w {
		s0 += v * x0[j]
		s1 += v * x1[j]
		s2 += v * x2[j]
		s3 += v * x3[j]
	}
	return
}

// dot1Go returns the dot product of w and x.
func dot1Go(w, x []float32) float32 {
	x = x[:len(w)]
	var s float32
	for j, v := range w {
		s += v * x[j]
	}
	return s
}
