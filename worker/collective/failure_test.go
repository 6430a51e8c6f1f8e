package collective_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
)

// TestSuccessiveGenerations rebuilds rings on the same transports as the
// worker set shrinks and grows, closing each generation before the next.
func TestSuccessiveGenerations(t *testing.T) {
	ts := listenN(t, 5, testJob)
	for _, g := range []struct {
		gen     int64
		members []int // transports in rank order
	}{
		{1, []int{0, 1, 2}},
		{2, []int{0, 2}},
		{3, []int{2, 0, 3, 4}},
		{7, []int{4, 3, 2, 1, 0}},
		{8, []int{1}},
	} {
		members := make([]*collective.Transport, len(g.members))
		for i, m := range g.members {
			members[i] = ts[m]
		}
		rings := buildRing(t, members, g.gen, 5*time.Second)
		bufs := make([][]float32, len(rings))
		err := firstErr(parallel(len(rings), func(rank int) error {
			bufs[rank] = []float32{1, float32(rank)}
			return rings[rank].AllReduce(context.Background(), bufs[rank])
		}))
		if err != nil {
			t.Fatalf("generation %d: %v", g.gen, err)
		}
		n := len(rings)
		for rank, b := range bufs {
			if b[0] != float32(n) || b[1] != float32(n*(n-1)/2) {
				t.Fatalf("generation %d rank %d: got %v", g.gen, rank, b)
			}
			if rings[rank].Generation() != g.gen || rings[rank].Size() != n || rings[rank].Rank() != rank {
				t.Fatalf("generation %d rank %d: ring reports generation %d size %d rank %d", g.gen, rank,
					rings[rank].Generation(), rings[rank].Size(), rings[rank].Rank())
			}
		}
		for _, r := range rings {
			r.Close()
		}
	}
}

// TestStaleGenerationRefused: once a transport is at generation 5, a
// member still at generation 4 cannot connect to it (its NewRing fails with
// ErrRefused), nor can a member of another job, and the transport itself
// refuses to go back to generation 4. The generation-5 ring is unaffected.
func TestStaleGenerationRefused(t *testing.T) {
	ts := listenN(t, 2, testJob)
	rings := buildRing(t, ts, 5, 5*time.Second)

	old := listenN(t, 1, testJob)[0]
	_, err := old.NewRing(context.Background(), collective.RingConfig{
		Generation: 4, Rank: 0, Peers: []string{old.Addr(), ts[0].Addr()}, Timeout: 2 * time.Second,
	})
	if !errors.Is(err, collective.ErrRefused) || !errors.Is(err, collective.ErrStaleGeneration) {
		t.Fatalf("generation 4 dialing a transport at generation 5: want ErrRefused and ErrStaleGeneration, got %v", err)
	}

	other := listenN(t, 1, "another-job")[0]
	_, err = other.NewRing(context.Background(), collective.RingConfig{
		Generation: 6, Rank: 0, Peers: []string{other.Addr(), ts[1].Addr()}, Timeout: 2 * time.Second,
	})
	if !errors.Is(err, collective.ErrRefused) || errors.Is(err, collective.ErrStaleGeneration) {
		t.Fatalf("another job dialing: want ErrRefused (not stale), got %v", err)
	}

	_, err = ts[0].NewRing(context.Background(), collective.RingConfig{
		Generation: 4, Rank: 0, Peers: addrs(ts), Timeout: time.Second,
	})
	if !errors.Is(err, collective.ErrStaleGeneration) {
		t.Fatalf("NewRing for an older generation: want ErrStaleGeneration, got %v", err)
	}

	bufs := [][]float32{{1}, {2}}
	if err := firstErr(parallel(2, func(rank int) error {
		return rings[rank].AllReduce(context.Background(), bufs[rank])
	})); err != nil {
		t.Fatalf("generation 5 after refusals: %v", err)
	}
	if bufs[0][0] != 3 || bufs[1][0] != 3 {
		t.Fatalf("generation 5 after refusals: got %v", bufs)
	}
}

// TestWrongPeerRefusedWhileWaiting: a transport waiting for its predecessor
// refuses a stranger of the same generation with the wrong rank, and still
// connects to the right predecessor afterwards.
func TestWrongPeerRefusedWhileWaiting(t *testing.T) {
	ts := listenN(t, 2, testJob)
	stranger := listenN(t, 1, testJob)[0]
	done := make(chan error, 1)
	var ring0 *collective.Ring
	go func() {
		r, err := ts[0].NewRing(context.Background(), collective.RingConfig{Generation: 2, Rank: 0, Peers: addrs(ts), Timeout: 5 * time.Second})
		ring0 = r
		done <- err
	}()
	// The stranger claims to be rank 0 of a 3-member ring dialing rank 1 = ts[0].
	_, err := stranger.NewRing(context.Background(), collective.RingConfig{
		Generation: 2, Rank: 0, Peers: []string{stranger.Addr(), ts[0].Addr(), "127.0.0.1:1"}, Timeout: 2 * time.Second,
	})
	if !errors.Is(err, collective.ErrRefused) {
		t.Fatalf("stranger: want ErrRefused, got %v", err)
	}
	r1, err := ts[1].NewRing(context.Background(), collective.RingConfig{Generation: 2, Rank: 1, Peers: addrs(ts), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	defer r1.Close()
	if err := <-done; err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	defer ring0.Close()
	if err := firstErr(parallel(2, func(rank int) error {
		return []*collective.Ring{ring0, r1}[rank].Barrier(context.Background())
	})); err != nil {
		t.Fatal(err)
	}
}

// TestStalledPeerFailsEveryoneWithinTimeout: a member that never enters the
// operation makes every other member return a PeerError within the
// deadline, and the ring stays failed.
func TestStalledPeerFailsEveryoneWithinTimeout(t *testing.T) {
	const world, stalled = 5, 2
	const timeout = 300 * time.Millisecond
	rings := buildRing(t, listenN(t, world, testJob), 1, timeout)
	errs := parallel(world, func(rank int) error {
		if rank == stalled {
			return nil
		}
		buf := make([]float32, 1<<16)
		return rings[rank].AllReduce(context.Background(), buf)
	})
	for rank, err := range errs {
		if rank == stalled {
			continue
		}
		if !isPeerErr(err) {
			t.Fatalf("rank %d: want a PeerError, got %v", rank, err)
		}
	}
	var pe *collective.PeerError
	errors.As(errs[stalled+1], &pe)
	if pe.Rank != stalled || pe.Generation != 1 || pe.Op != "allreduce" {
		t.Fatalf("successor of the stalled member: got %+v, want rank %d generation 1 op allreduce", pe, stalled)
	}
	// That nobody hangs is shown by the call returning at all; that the
	// deadline (not some other error) ended it, by the error: the stalled
	// member's successor waited for data that never came.
	var ne net.Error
	if !errors.As(errs[stalled+1], &ne) || !ne.Timeout() {
		t.Fatalf("successor of the stalled member: %v, want a timeout", errs[stalled+1])
	}
	if err := rings[0].AllReduce(context.Background(), []float32{1}); !isPeerErr(err) {
		t.Fatalf("operation on a failed ring: want the PeerError again, got %v", err)
	}
}

// TestCloseAndCancelMidOperation: a member that closes its ring, or whose
// context ends, during an operation makes the others fail with a PeerError;
// the member itself gets ErrClosed or its context's error.
func TestCloseAndCancelMidOperation(t *testing.T) {
	for _, mode := range []string{"close", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			const world = 3
			rings := buildRing(t, listenN(t, world, testJob), 1, 5*time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errs := parallel(world, func(rank int) error {
				if rank == 1 {
					time.AfterFunc(50*time.Millisecond, func() {
						if mode == "close" {
							rings[1].Close()
						} else {
							cancel()
						}
					})
					return rings[1].AllReduce(ctx, make([]float32, 1<<14)) // waits for rank 0, which never comes
				}
				time.Sleep(200 * time.Millisecond)
				return rings[rank].AllReduce(context.Background(), make([]float32, 1<<14))
			})
			if mode == "close" && !errors.Is(errs[1], collective.ErrClosed) {
				t.Fatalf("closing member: want ErrClosed, got %v", errs[1])
			}
			if mode == "cancel" && !errors.Is(errs[1], context.Canceled) {
				t.Fatalf("cancelled member: want context.Canceled, got %v", errs[1])
			}
			for _, rank := range []int{0, 2} {
				if !isPeerErr(errs[rank]) {
					t.Fatalf("rank %d: want a PeerError, got %v", rank, errs[rank])
				}
			}
		})
	}
}

func TestNewRingValidatesConfig(t *testing.T) {
	tr := listenN(t, 1, testJob)[0]
	for _, cfg := range []collective.RingConfig{
		{Generation: 1, Rank: 0},
		{Generation: 1, Rank: 2, Peers: []string{"a", "b"}},
		{Generation: -1, Rank: 0, Peers: []string{"a"}},
		{Generation: 1, Rank: 0, Peers: []string{"a"}, Timeout: -time.Second},
	} {
		if _, err := tr.NewRing(context.Background(), cfg); err == nil {
			t.Fatalf("NewRing(%+v) succeeded", cfg)
		}
	}
	if _, err := collective.Listen("127.0.0.1:0", "", nil); err == nil {
		t.Fatal("Listen with an empty job succeeded")
	}
}

// TestTransportCloseEndsNewRing: a ring still waiting for its predecessor
// gives up with ErrClosed when its transport closes, not at the timeout.
func TestTransportCloseEndsNewRing(t *testing.T) {
	ts := listenN(t, 2, testJob)
	done := make(chan error, 1)
	go func() {
		_, err := ts[0].NewRing(context.Background(), collective.RingConfig{Generation: 1, Rank: 0, Peers: addrs(ts), Timeout: time.Minute})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ts[0].Close()
	// Had it waited out its minute instead, the error would be a timeout.
	if err := <-done; !errors.Is(err, collective.ErrClosed) {
		t.Fatalf("want ErrClosed, got %v", err)
	}
}
