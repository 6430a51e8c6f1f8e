package collective_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
)

// TestAllReduceExactTail: with fp16 on the wire, the metadata that rides
// after a gradient (here: each rank's partition offsets, above 2048 where
// fp16 cannot hold an integer) comes back exact from AllReduceExactTail,
// while the gradient head is compressed as AllReduce compresses it. The
// plain AllReduce is shown to lose those integers: the reason the tail
// exists (offsets above 2048 are not exact in fp16).
func TestAllReduceExactTail(t *testing.T) {
	const grad, world = 3000, 3
	for _, tc := range []struct {
		name  string
		exact bool
	}{{"exact tail", true}, {"plain allreduce loses integers", false}} {
		t.Run(tc.name, func(t *testing.T) {
			rings := buildRingWith(t, listenN(t, world, testJob), func(int) collective.RingConfig {
				return collective.RingConfig{Generation: 1, Compression: collective.CompressionFP16, ChunkBytes: 1024}
			})
			meta := 2 + 2*world // count, flag, then per rank: start, end
			bufs := make([][]float32, world)
			for rank := range bufs {
				b := make([]float32, grad+meta)
				for i := range grad {
					b[i] = float32(math.Sin(float64(i*(rank+1)))) / 4
				}
				m := b[grad:]
				m[0], m[1] = float32(24+rank), 1
				m[2+2*rank], m[3+2*rank] = float32(4097+1000*rank), float32(16_777_215-rank) // 2^24-1 and below
				bufs[rank] = b
			}
			if err := firstErr(parallel(world, func(rank int) error {
				if tc.exact {
					return rings[rank].AllReduceExactTail(context.Background(), bufs[rank], meta)
				}
				return rings[rank].AllReduce(context.Background(), bufs[rank])
			})); err != nil {
				t.Fatal(err)
			}
			want := []float32{24 + 25 + 26, world}
			for rank := range world {
				want = append(want, float32(4097+1000*rank), float32(16_777_215-rank))
			}
			var wrong []string
			for rank := range world {
				for i, w := range want {
					if got := bufs[rank][grad+i]; got != w {
						wrong = append(wrong, fmt.Sprintf("rank %d meta[%d] = %v, want %v", rank, i, got, w))
					}
				}
				for i := range grad {
					if bufs[rank][i] != bufs[0][i] {
						t.Fatalf("gradient element %d differs between rank %d and 0", i, rank)
					}
				}
			}
			switch {
			case tc.exact && len(wrong) > 0:
				t.Fatalf("exact tail corrupted: %v", wrong)
			case !tc.exact && len(wrong) == 0:
				t.Fatal("fp16 AllReduce kept integers above 2048 exact; the test's premise is wrong")
			}
			// The head was compressed: fp16 rounding (about 1e-3 here, far
			// above float32's 1e-7) shows in the gradient.
			var worst float64
			for i := range grad {
				var sum float64
				for rank := range world {
					sum += float64(float32(math.Sin(float64(i*(rank+1)))) / 4)
				}
				worst = max(worst, math.Abs(sum-float64(bufs[0][i])))
			}
			if worst < 1e-5 || worst > 1e-2 {
				t.Fatalf("gradient head error %g, want fp16's (1e-5..1e-2)", worst)
			}
		})
	}
}

// TestAllReduceExactTailMismatch: members that split the buffer
// differently fail instead of summing metadata into gradients.
func TestAllReduceExactTailMismatch(t *testing.T) {
	rings := buildRingWith(t, listenN(t, 2, testJob), func(int) collective.RingConfig {
		return collective.RingConfig{Generation: 1, Compression: collective.CompressionFP16, Timeout: 5 * time.Second}
	})
	errs := parallel(2, func(rank int) error {
		return rings[rank].AllReduceExactTail(context.Background(), make([]float32, 10), 2+rank)
	})
	if !errors.Is(errs[0], collective.ErrMismatch) && !errors.Is(errs[1], collective.ErrMismatch) {
		t.Fatalf("want ErrMismatch on some member, got %v / %v", errs[0], errs[1])
	}
	if err := rings[0].AllReduceExactTail(context.Background(), make([]float32, 3), 4); err == nil {
		t.Fatal("exact tail longer than the buffer accepted")
	}
}
