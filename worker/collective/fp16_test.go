package collective

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestHalfRoundTripsEveryHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := f16ToF32Slow(uint16(h))
		if math.IsNaN(float64(f)) {
			if got := f32ToF16(f); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("half %#04x: NaN encoded as %#04x", h, got)
			}
			continue
		}
		if got := f32ToF16(f); got != uint16(h) {
			t.Fatalf("half %#04x = %g encodes back as %#04x", h, f, got)
		}
	}
}

// TestHalfRoundsToNearest: the encoded half is never farther from the
// float than its neighbours are.
func TestHalfRoundsToNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		f := float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(40)-28))
		h := f32ToF16(f)
		got := float64(f16ToF32Slow(h))
		if math.IsInf(got, 0) {
			if math.Abs(float64(f)) < 65504 {
				t.Fatalf("%g encoded as infinity", f)
			}
			continue
		}
		for _, nb := range []uint16{h - 1, h + 1} {
			other := float64(f16ToF32Slow(nb))
			if nb&0x7c00 == 0x7c00 || (nb^h)&0x8000 != 0 {
				continue
			}
			if math.Abs(other-float64(f)) < math.Abs(got-float64(f)) {
				t.Fatalf("%g encoded as %g, but %g is nearer", f, got, other)
			}
		}
	}
}

// TestHalfVectorMatchesGo: the F16C loops give the Go loops' bits.
func TestHalfVectorMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{0, 1, 15, 16, 17, 100, 4099} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(44)-30))
		}
		if n > 3 {
			src[0], src[1], src[2] = 70000, float32(math.Inf(-1)), 1e-8
		}
		h, hGo := make([]uint16, n), make([]uint16, n)
		encodeHalf(h, src)
		encodeHalfGo(hGo, src)
		for i := range h {
			if h[i] != hGo[i] {
				t.Fatalf("n=%d: encode %g: vector %#04x, Go %#04x", n, src[i], h[i], hGo[i])
			}
		}
		for _, k := range []float32{0, 0.25} {
			d, dGo := append([]float32(nil), src...), append([]float32(nil), src...)
			addHalf(d, h, k)
			addHalfGo(dGo, h, k)
			dec, decGo := make([]float32, n), make([]float32, n)
			decodeHalf(dec, h)
			decodeHalfGo(decGo, h)
			for i := range d {
				if d[i] != dGo[i] || dec[i] != decGo[i] {
					t.Fatalf("n=%d k=%v i=%d: vector add %v decode %v, Go add %v decode %v", n, k, i, d[i], dec[i], dGo[i], decGo[i])
				}
			}
		}
	}
}
