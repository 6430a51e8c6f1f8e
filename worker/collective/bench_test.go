package collective_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
)

// BenchmarkAllReduceInProcess: every rank a goroutine with its own
// Transport, over loopback TCP. SetBytes is the vector size, so MB/s is the
// algorithm bandwidth.
func BenchmarkAllReduceInProcess(b *testing.B) {
	for _, comp := range []collective.Compression{collective.CompressionNone, collective.CompressionFP16} {
		for _, world := range []int{2, 4} {
			for _, mib := range []int{1, 64} {
				benchAllReduce(b, comp, world, mib, 0)
			}
		}
	}
	// The worker's step: a 4 MiB gradient (about its 1M parameters) and the
	// metadata of 4 ranks (21 floats) kept float32 after it.
	for _, comp := range []collective.Compression{collective.CompressionNone, collective.CompressionFP16} {
		benchAllReduce(b, comp, 4, 4, 0)
		benchAllReduce(b, comp, 4, 4, 21)
	}
}

func benchAllReduce(b *testing.B, comp collective.Compression, world, mib, exact int) {
	name := fmt.Sprintf("%s/world=%d/mib=%d", comp, world, mib)
	if exact > 0 {
		name += fmt.Sprintf("/exact-tail=%d", exact)
	}
	b.Run(name, func(b *testing.B) {
		ts := listenN(&testing.T{}, world, testJob)
		rings := buildRingWith(&testing.T{}, ts, func(int) collective.RingConfig {
			return collective.RingConfig{Generation: 1, Timeout: time.Minute, Compression: comp}
		})
		bufs := make([][]float32, world)
		for i := range bufs {
			bufs[i] = make([]float32, mib<<20/4+exact)
		}
		b.SetBytes(int64(mib << 20))
		b.ResetTimer()
		for range b.N {
			if err := firstErr(parallel(world, func(rank int) error {
				if exact > 0 {
					return rings[rank].AllReduceExactTail(context.Background(), bufs[rank], exact)
				}
				return rings[rank].AllReduce(context.Background(), bufs[rank])
			})); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		for _, r := range rings {
			r.Close()
		}
		for _, tr := range ts {
			tr.Close()
		}
	})
}
