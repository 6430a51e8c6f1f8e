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

func encodeHalf(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	if n := len(src) &^ 15; hasF16C && n > 0 {
		encodeHalfF16C(&dst[0], &src[0], n)
		dst, src = dst[n:], src[n:]
	}
	encodeHalfGo(dst, src)
}

func decodeHalf(dst []float32, src []uint16) {
	src = src[:len(dst)]
	if n := len(dst) &^ 15; hasF16C && n > 0 {
		decodeHalfF16C(&dst[0], &src[0], n)
		dst, src = dst[n:], src[n:]
	}
	decodeHalfGo(dst, src)
}

func addHalf(dst []float32, src []uint16, k float32) {
	src = src[:len(dst)]
	if n := len(dst) &^ 15; hasF16C && n > 0 {
		addHalfF16C(&dst[0], &src[0], n, k)
		dst, src = dst[n:], src[n:]
	}
	addHalfGo(dst, src, k)
}

func addTo(dst, src []float32) {
	src = src[:len(dst)]
	if n := len(dst) &^ 31; hasAVX2 && n > 0 {
		addAVX2(&dst[0], &src[0], n)
		dst, src = dst[n:], src[n:]
	}
	addToGo(dst, src)
}

func addScaledTo(dst, src []float32, k float32) {
	src = src[:len(dst)]
	if n := len(dst) &^ 31; hasAVX2 && n > 0 {
		addScaledAVX2(&dst[0], &src[0], n, k)
		dst, src = dst[n:], src[n:]
	}
	addScaledToGo(dst, src, k)
}
