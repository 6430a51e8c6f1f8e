package collective

import (
	"math/rand/v2"
	"testing"
)

func TestAddTo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 100, 1000, 4099} {
		dst, src := make([]float32, n), make([]float32, n)
		want := make([]float32, n)
		wantScaled := make([]float32, n)
		for i := range dst {
			dst[i], src[i] = rng.Float32(), rng.Float32()
			want[i] = dst[i] + src[i]
			wantScaled[i] = (dst[i] + src[i]) * 0.25
		}
		scaled := append([]float32(nil), dst...)
		goDst, goScaled := append([]float32(nil), dst...), append([]float32(nil), dst...)
		addTo(dst, src)
		addScaledTo(scaled, src, 0.25)
		addToGo(goDst, src)
		addScaledToGo(goScaled, src, 0.25)
		for i := range dst {
			if dst[i] != goDst[i] || scaled[i] != goScaled[i] {
				t.Fatalf("n=%d i=%d: vector and Go loops differ", n, i)
			}
		}
		for i := range dst {
			if dst[i] != want[i] || scaled[i] != wantScaled[i] {
				t.Fatalf("n=%d i=%d: addTo %v want %v, addScaledTo %v want %v", n, i, dst[i], want[i], scaled[i], wantScaled[i])
			}
		}
	}
}

// BenchmarkAddTo: the sum loop on a piece that fits in cache (SetBytes is
// the bytes added).
func BenchmarkAddTo(b *testing.B) {
	dst, src := make([]float32, DefaultChunkBytes/4), make([]float32, DefaultChunkBytes/4)
	for _, impl := range []struct {
		name string
		add  func(dst, src []float32)
	}{{"dispatch", addTo}, {"go", addToGo}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(DefaultChunkBytes)
			for range b.N {
				impl.add(dst, src)
			}
		})
	}
}
