package collective

import (
	"fmt"
	"math"
	"unsafe"
)

// Compression is how AllReduce puts floats on the wire.
type Compression uint8

const (
	// CompressionNone sends float32 as is: the exact sum, in any order.
	CompressionNone Compression = iota
	// CompressionFP16 sends IEEE half floats: half the bytes, about three
	// significant digits, values above 65504 become infinite. Every partial
	// sum is rounded, and the owner of each segment rounds its result too,
	// so all members still end with identical values.
	CompressionFP16
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionFP16:
		return "fp16"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// ParseCompression reads "none" or "fp16".
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return CompressionNone, nil
	case "fp16":
		return CompressionFP16, nil
	}
	return 0, fmt.Errorf("collective: unknown compression %q (want none or fp16)", s)
}

func halfBytes(h []uint16) []byte {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), len(h)*2)
}

// f16ToF32Table decodes every half: 256 KiB, built once.
var f16ToF32Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = f16ToF32Slow(uint16(h))
	}
	return &t
}()

// encodeHalfGo rounds src to halves (to nearest, ties to even).
func encodeHalfGo(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = f32ToF16(f)
	}
}

// decodeHalfGo sets dst[i] = src[i].
func decodeHalfGo(dst []float32, src []uint16) {
	src = src[:len(dst)]
	t := f16ToF32Table
	for i, h := range src {
		dst[i] = t[h]
	}
}

// addHalfGo sets dst[i] = (dst[i] + src[i]) * k, or dst[i] += src[i] when k is 0.
func addHalfGo(dst []float32, src []uint16, k float32) {
	src = src[:len(dst)]
	t := f16ToF32Table
	if k == 0 {
		for i, h := range src {
			dst[i] += t[h]
		}
		return
	}
	for i, h := range src {
		dst[i] = (dst[i] + t[h]) * k
	}
}

func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00 // too big: infinity
	}
	if e <= 0 { // a half subnormal, or zero
		if e < -10 {
			return sign
		}
		mant |= 1 << 23
		shift := uint(14 - e)
		half := mant >> shift
		rem, halfway := mant&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > halfway || (rem == halfway && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // a carry into the exponent is the right answer, up to infinity
	}
	return sign | uint16(half)
}

func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}
