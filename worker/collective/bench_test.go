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
				benchAllReduce(b, comp, world, mib)
			}
		}
	}
}

func benchAllReduce(b *testing.B, comp collective.Compression, world, mib int) {
	b.Run(fmt.Sprintf("%s/world=%d/mib=%d", comp, world, mib), func(b *testing.B) {
		ts := listenN(&testing.T{}, world, testJob)
		rings := buildRingWith(&testing.T{}, ts, func(int) collective.RingConfig {
			return collective.RingConfig{Generation: 1, Timeout: time.Minute, Compression: comp}
		})
		bufs := make([][]float32, world)
		for i := range bufs {
			bufs[i] = make([]float32, mib<<20/4)
		}
		b.SetBytes(int64(mib << 20))
		b.ResetTimer()
		for range b.N {
			if err := firstErr(parallel(world, func(rank int) error {
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
