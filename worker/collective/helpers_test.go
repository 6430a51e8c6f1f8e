package collective_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/collective"
)

const testJob = "job-test"

// listenN opens n transports for job on loopback, closed with the test.
func listenN(t *testing.T, n int, job string) []*collective.Transport {
	t.Helper()
	ts := make([]*collective.Transport, n)
	for i := range ts {
		tr, err := collective.Listen("127.0.0.1:0", job, nil)
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		t.Cleanup(func() { tr.Close() })
		ts[i] = tr
	}
	return ts
}

func addrs(ts []*collective.Transport) []string {
	out := make([]string, len(ts))
	for i, tr := range ts {
		out[i] = tr.Addr()
	}
	return out
}

// buildRing builds generation gen over ts (rank = index), concurrently as
// real members would, and closes the rings with the test.
func buildRing(t *testing.T, ts []*collective.Transport, gen int64, timeout time.Duration) []*collective.Ring {
	t.Helper()
	rings := make([]*collective.Ring, len(ts))
	errs := parallel(len(ts), func(rank int) error {
		r, err := ts[rank].NewRing(context.Background(), collective.RingConfig{
			Generation: gen, Rank: rank, Peers: addrs(ts), Timeout: timeout,
		})
		rings[rank] = r
		return err
	})
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: NewRing generation %d: %v", rank, gen, err)
		}
	}
	for _, r := range rings {
		t.Cleanup(func() { r.Close() })
	}
	return rings
}

// parallel runs f for every rank in its own goroutine and returns the errors.
func parallel(n int, f func(rank int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for rank := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[rank] = f(rank)
		}()
	}
	wg.Wait()
	return errs
}

func firstErr(errs []error) error {
	for rank, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
	}
	return nil
}

// checkSum compares every rank's result with the float64 sum of the inputs
// (times scale) and checks that all ranks hold bit-identical results.
func checkSum(t *testing.T, inputs, results [][]float32, scale float64) {
	t.Helper()
	n := len(inputs[0])
	for i := 0; i < n; i++ {
		want := 0.0
		for _, in := range inputs {
			want += float64(in[i])
		}
		want *= scale
		got := results[0][i]
		if math.Abs(float64(got)-want) > 1e-5*float64(len(inputs)) {
			t.Fatalf("element %d of %d: got %v, want %v", i, n, got, want)
		}
		for rank := 1; rank < len(results); rank++ {
			if results[rank][i] != got {
				t.Fatalf("element %d: rank %d holds %v, rank 0 holds %v", i, rank, results[rank][i], got)
			}
		}
	}
}

func isPeerErr(err error) bool {
	var pe *collective.PeerError
	return errors.Is(err, collective.ErrPeerFailed) && errors.As(err, &pe)
}
