package apibench

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used so far:
// the API server and the load generator together, not Redis.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerOp is CPU microseconds per operation since start (a CPU time).
func cpuPerOp(start time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64((cpuTime() - start).Microseconds()) / float64(n)
}

// worker is one load goroutine's state: its random source and connection.
type worker struct {
	r *rand.Rand
	c conn
}

// phase runs op closed-loop from clients goroutines for d (each sends its
// next request when the previous one is answered) and returns the number of
// operations, their rate and their latencies (sorted).
func phase(ctx context.Context, clients int, d time.Duration, op func(*worker)) (int, float64, []time.Duration) {
	start := time.Now()
	deadline := start.Add(d)
	wait := goWorkers(clients, 1, func(w *worker) (lats []time.Duration) {
		for ctx.Err() == nil {
			t0 := time.Now()
			if t0.After(deadline) {
				break
			}
			op(w)
			lats = append(lats, time.Since(t0))
		}
		return lats
	})
	lats := wait()
	return collect(lats, time.Since(start))
}

// openPhase issues op at a fixed arrival rate for d, whatever the answers
// do: request i is due at start + i/rate and its latency runs from that due
// time, not from when a worker got to send it, so a slow server is charged
// for the requests it kept waiting (no coordinated omission). At most
// workers requests are in flight; the others queue, their wait counted.
// It returns the number completed, the achieved rate (completed over the
// time from start to the last answer) and the latencies (sorted).
func openPhase(ctx context.Context, rate float64, workers int, d time.Duration, op func(*worker)) (int, float64, []time.Duration) {
	n := int(rate * d.Seconds())
	if n < 1 {
		n = 1
	}
	due := make(chan time.Time, n)
	start := time.Now()
	wait := goWorkers(workers, 2, func(w *worker) (lats []time.Duration) {
		for t := range due {
			if ctx.Err() != nil {
				continue
			}
			op(w)
			lats = append(lats, time.Since(t))
		}
		return lats
	})
	interval := time.Duration(float64(time.Second) / rate)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		t := start.Add(time.Duration(i) * interval)
		if wait := time.Until(t); wait > 0 {
			time.Sleep(wait) // a late wake-up sends a burst; each is charged from its due time
		}
		due <- t
	}
	close(due)
	lats := wait()
	return collect(lats, time.Since(start))
}

// goWorkers starts n goroutines, each running body with a worker of its
// own (its rand stream seeded by its index and stream, its connection
// closed when body returns); wait waits for all of them and returns the
// latencies each body returned.
func goWorkers(n int, stream uint64, body func(*worker) []time.Duration) (wait func() [][]time.Duration) {
	lats := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{r: rand.New(rand.NewPCG(uint64(i), stream))}
			defer w.c.close()
			lats[i] = body(w)
		}()
	}
	return func() [][]time.Duration {
		wg.Wait()
		return lats
	}
}

func collect(lats [][]time.Duration, elapsed time.Duration) (int, float64, []time.Duration) {
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return len(all), float64(len(all)) / elapsed.Seconds(), all
}

// pct is the q-quantile of sorted latencies, in milliseconds.
func pct(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}
