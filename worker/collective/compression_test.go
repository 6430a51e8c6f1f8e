package collective_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
)

func buildRingWith(t *testing.T, ts []*collective.Transport, cfg func(rank int) collective.RingConfig) []*collective.Ring {
	t.Helper()
	rings := make([]*collective.Ring, len(ts))
	err := firstErr(parallel(len(ts), func(rank int) error {
		c := cfg(rank)
		c.Rank, c.Peers = rank, addrs(ts)
		r, err := ts[rank].NewRing(context.Background(), c)
		rings[rank] = r
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rings {
		t.Cleanup(func() { r.Close() })
	}
	return rings
}

// TestAllReduceFP16: with fp16 on the wire the sum is close (half precision
// per hop) and still bit-identical on every member.
func TestAllReduceFP16(t *testing.T) {
	for _, tc := range []struct{ world, n int }{{2, 1}, {3, 1000}, {4, 1<<16 + 3}, {7, 5000}} {
		t.Run(fmt.Sprintf("world=%d/n=%d", tc.world, tc.n), func(t *testing.T) {
			rings := buildRingWith(t, listenN(t, tc.world, testJob), func(int) collective.RingConfig {
				return collective.RingConfig{Generation: 1, Compression: collective.CompressionFP16, ChunkBytes: 4096}
			})
			rng := rand.New(rand.NewPCG(5, uint64(tc.n)))
			inputs, results := make([][]float32, tc.world), make([][]float32, tc.world)
			for rank := range inputs {
				inputs[rank] = randomVec(rng, tc.n)
				results[rank] = append([]float32(nil), inputs[rank]...)
			}
			if err := firstErr(parallel(tc.world, func(rank int) error {
				return rings[rank].AllReduceMean(context.Background(), results[rank])
			})); err != nil {
				t.Fatal(err)
			}
			for i := range tc.n {
				want := 0.0
				for _, in := range inputs {
					want += float64(in[i])
				}
				want /= float64(tc.world)
				// each hop rounds a partial sum of magnitude <= world to 11 bits
				if got := float64(results[0][i]); math.Abs(got-want) > 2e-3 {
					t.Fatalf("element %d: got %v, want %v", i, got, want)
				}
				for rank := 1; rank < tc.world; rank++ {
					if results[rank][i] != results[0][i] {
						t.Fatalf("element %d: rank %d holds %v, rank 0 holds %v", i, rank, results[rank][i], results[0][i])
					}
				}
			}
		})
	}
}

func TestCompressionMismatchFails(t *testing.T) {
	rings := buildRingWith(t, listenN(t, 2, testJob), func(rank int) collective.RingConfig {
		return collective.RingConfig{Generation: 1, Compression: collective.Compression(rank), Timeout: 5 * time.Second}
	})
	errs := parallel(2, func(rank int) error {
		return rings[rank].AllReduce(context.Background(), make([]float32, 10))
	})
	for rank, err := range errs {
		if !errors.Is(err, collective.ErrPeerFailed) {
			t.Fatalf("rank %d: want a PeerError, got %v", rank, err)
		}
	}
	if !errors.Is(errs[0], collective.ErrMismatch) && !errors.Is(errs[1], collective.ErrMismatch) {
		t.Fatalf("want ErrMismatch on some member, got %v / %v", errs[0], errs[1])
	}
}
