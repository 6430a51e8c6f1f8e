package collective

// The sum loops in AVX2 when the CPU and OS support it: eight floats per
// instruction instead of one. The results are bit-identical to the Go loops
// (the same IEEE single-precision add, then multiply).

//go:noescape
func addAVX2(dst, src *float32, n int)

//go:noescape
func addScaledAVX2(dst, src *float32, n int, k float32)

//go:noescape
func encodeHalfF16C(dst *uint16, src *float32, n int)

//go:noescape
func decodeHalfF16C(dst *float32, src *uint16, n int)

//go:noescape
func addHalfF16C(dst *float32, src *uint16, n int, k float32)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

func xgetbv0() (a, d uint32)

var hasAVX2, hasF16C = detectAVX()

func detectAVX() (avx2, f16c bool) {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false, false
	}
	_, _, c, _ := cpuid(1, 0)
	const osxsave, avx, f16 = 1 << 27, 1 << 28, 1 << 29
	if c&osxsave == 0 || c&avx == 0 {
		return false, false
	}
	if xcr0, _ := xgetbv0(); xcr0&6 != 6 { // XMM and YMM state enabled by the OS
		return false, false
	}
	_, b, _, _ := cpuid(7, 0)
	return b&(1<<5) != 0, c&f16 != 0
}

// vectorized runs kernel, when the CPU has it, on the leading whole blocks
// of dst and src (len(dst) elements of each), and tail on the rest.
func vectorized[D, S any](dst []D, src []S, block int, have bool, kernel func(dst *D, src *S, n int), tail func(dst []D, src []S)) {
	src = src[:len(dst)]
	if n := len(dst) &^ (block - 1); have && n > 0 {
		kernel(&dst[0], &src[0], n)
		dst, src = dst[n:], src[n:]
	}
	tail(dst, src)
}

func encodeHalf(dst []uint16, src []float32) {
	vectorized(dst[:len(src)], src, 16, hasF16C, encodeHalfF16C, encodeHalfGo)
}

func decodeHalf(dst []float32, src []uint16) {
	vectorized(dst, src, 16, hasF16C, decodeHalfF16C, decodeHalfGo)
}

func addHalf(dst []float32, src []uint16, k float32) {
	vectorized(dst, src, 16, hasF16C,
		func(dst *float32, src *uint16, n int) { addHalfF16C(dst, src, n, k) },
		func(dst []float32, src []uint16) { addHalfGo(dst, src, k) })
}

func addTo(dst, src []float32) {
	vectorized(dst, src, 32, hasAVX2, addAVX2, addToGo)
}

func addScaledTo(dst, src []float32, k float32) {
	vectorized(dst, src, 32, hasAVX2,
		func(dst, src *float32, n int) { addScaledAVX2(dst, src, n, k) },
		func(dst, src []float32) { addScaledToGo(dst, src, k) })
}
