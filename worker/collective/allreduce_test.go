package collective_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
)

func randomVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.Float64()*2 - 1)
	}
	return v
}

// TestAllReduceMatchesSum runs every world size 1..8 over every length, in
// one process with a Transport per rank, with the same ring reused across
// lengths (so buffers and pieces of every shape follow one another).
func TestAllReduceMatchesSum(t *testing.T) {
	lengths := []int{0, 1, 7, 1000, 1 << 20}
	for world := 1; world <= 8; world++ {
		t.Run(fmt.Sprintf("world=%d", world), func(t *testing.T) {
			t.Parallel()
			rings := buildRing(t, listenN(t, world, testJob), 1, 20*time.Second)
			rng := rand.New(rand.NewPCG(uint64(world), 7))
			for _, n := range lengths {
				if raceEnabled && n == 1<<20 && world != 4 {
					n = 1<<16 + 3 // the race detector makes the big vector slow; world 4 keeps it
				}
				inputs := make([][]float32, world)
				results := make([][]float32, world)
				for rank := range inputs {
					inputs[rank] = randomVec(rng, n)
					results[rank] = append([]float32(nil), inputs[rank]...)
				}
				err := firstErr(parallel(world, func(rank int) error {
					return rings[rank].AllReduce(context.Background(), results[rank])
				}))
				if err != nil {
					t.Fatalf("length %d: %v", n, err)
				}
				if n > 0 {
					checkSum(t, inputs, results, 1)
				}
			}
		})
	}
}

func TestAllReduceMeanAndSmallChunks(t *testing.T) {
	tests := []struct {
		name       string
		world, n   int
		chunkBytes int
	}{
		{"two ranks one piece", 2, 10, 0},
		{"three ranks many pieces", 3, 10007, 64},
		{"five ranks piece per float", 5, 333, 4},
		{"eight ranks shorter than world", 8, 5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := listenN(t, tc.world, testJob)
			rings := make([]*collective.Ring, tc.world)
			err := firstErr(parallel(tc.world, func(rank int) error {
				r, err := ts[rank].NewRing(context.Background(), collective.RingConfig{
					Generation: 3, Rank: rank, Peers: addrs(ts), ChunkBytes: tc.chunkBytes,
				})
				rings[rank] = r
				return err
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, r := range rings {
					r.Close()
				}
			}()
			rng := rand.New(rand.NewPCG(1, 2))
			inputs := make([][]float32, tc.world)
			results := make([][]float32, tc.world)
			for rank := range inputs {
				inputs[rank] = randomVec(rng, tc.n)
				results[rank] = append([]float32(nil), inputs[rank]...)
			}
			if err := firstErr(parallel(tc.world, func(rank int) error {
				return rings[rank].AllReduceMean(context.Background(), results[rank])
			})); err != nil {
				t.Fatal(err)
			}
			checkSum(t, inputs, results, 1/float64(tc.world))
		})
	}
}

func TestBroadcast(t *testing.T) {
	const world = 4
	rings := buildRing(t, listenN(t, world, testJob), 1, 10*time.Second)
	for _, tc := range []struct {
		root, size int
	}{{0, 0}, {1, 1}, {3, 1000}, {2, 3<<20 + 17}} {
		data := make([]byte, tc.size)
		for i := range data {
			data[i] = byte(i*7 + tc.root)
		}
		got := make([][]byte, world)
		err := firstErr(parallel(world, func(rank int) error {
			var in []byte
			if rank == tc.root {
				in = data
			}
			out, err := rings[rank].Broadcast(context.Background(), tc.root, in)
			got[rank] = out
			return err
		}))
		if err != nil {
			t.Fatalf("root %d size %d: %v", tc.root, tc.size, err)
		}
		for rank, g := range got {
			if string(g) != string(data) {
				t.Fatalf("root %d size %d: rank %d got %d bytes, want %d (equal: false)", tc.root, tc.size, rank, len(g), len(data))
			}
		}
	}
}

// TestBarrierWaitsForEveryone: no member leaves the barrier before the last
// one has entered it.
func TestBarrierWaitsForEveryone(t *testing.T) {
	for world := 1; world <= 5; world++ {
		t.Run(fmt.Sprintf("world=%d", world), func(t *testing.T) {
			rings := buildRing(t, listenN(t, world, testJob), 1, 10*time.Second)
			late := world - 1
			entered := make(chan struct{})
			errs := parallel(world, func(rank int) error {
				if rank == late {
					time.Sleep(50 * time.Millisecond)
					close(entered)
				}
				if err := rings[rank].Barrier(context.Background()); err != nil {
					return err
				}
				select {
				case <-entered:
					return nil
				default:
					return fmt.Errorf("left the barrier before rank %d entered", late)
				}
			})
			if err := firstErr(errs); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMismatchedOperationsFail(t *testing.T) {
	rings := buildRing(t, listenN(t, 3, testJob), 1, 5*time.Second)
	errs := parallel(3, func(rank int) error {
		buf := make([]float32, 10+rank%2)
		return rings[rank].AllReduce(context.Background(), buf)
	})
	for rank, err := range errs {
		if err == nil {
			t.Fatalf("rank %d: AllReduce with mismatched lengths succeeded", rank)
		}
	}
	if !isPeerErr(errs[2]) {
		t.Fatalf("rank 2 (successor of the odd one out): want a PeerError, got %v", errs[2])
	}
}

func TestRingSurvivesManyOperations(t *testing.T) {
	const world = 3
	rings := buildRing(t, listenN(t, world, testJob), 1, 10*time.Second)
	for step := range 50 {
		bufs := make([][]float32, world)
		err := firstErr(parallel(world, func(rank int) error {
			bufs[rank] = []float32{float32(rank + step), 1}
			if step%5 == 0 {
				if err := rings[rank].Barrier(context.Background()); err != nil {
					return err
				}
			}
			return rings[rank].AllReduce(context.Background(), bufs[rank])
		}))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want := float32(3*step + 3)
		for rank, b := range bufs {
			if b[0] != want || b[1] != world {
				t.Fatalf("step %d rank %d: got %v, want [%v %v]", step, rank, b, want, world)
			}
		}
	}
}
