package collective

import "unsafe"

// bytesOf views floats as their bytes in host order, without copying.
func bytesOf(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

// addToGo sets dst[i] += src[i]. Unrolled by eight with constant-length
// sub-slices so the compiler drops the bounds checks and keeps eight
// independent adds in flight.
func addToGo(dst, src []float32) {
	src = src[:len(dst)]
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		d := dst[i : i+8 : i+8]
		s := src[i : i+8 : i+8]
		d[0] += s[0]
		d[1] += s[1]
		d[2] += s[2]
		d[3] += s[3]
		d[4] += s[4]
		d[5] += s[5]
		d[6] += s[6]
		d[7] += s[7]
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// addScaledToGo sets dst[i] = (dst[i] + src[i]) * k: the last reduce step of
// AllReduceMean, so the mean costs no extra pass over the vector.
func addScaledToGo(dst, src []float32, k float32) {
	src = src[:len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		d := dst[i : i+4 : i+4]
		s := src[i : i+4 : i+4]
		d[0] = (d[0] + s[0]) * k
		d[1] = (d[1] + s[1]) * k
		d[2] = (d[2] + s[2]) * k
		d[3] = (d[3] + s[3]) * k
	}
	for ; i < len(dst); i++ {
		dst[i] = (dst[i] + src[i]) * k
	}
}
