package collective_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/worker/collective/loopback"
)

// childEnv makes the test binary act as one rank of a loopback ring.
const childEnv = "EDL_COLLECTIVE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := loopback.Serve(context.Background(), os.Stdin, os.Stdout, nil); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startChildren(t *testing.T, n int) *loopback.Group {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := loopback.Start(ctx, n, testJob, func(int) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		return cmd
	})
	if err != nil {
		t.Fatalf("start %d children: %v", n, err)
	}
	t.Cleanup(g.Close)
	return g
}

// TestAllReduceAcrossProcesses: every world size 1..8 over every length,
// each rank a separate process; each child checks its result against the
// plain sum of all ranks' data, and all ranks must hold identical bits.
func TestAllReduceAcrossProcesses(t *testing.T) {
	lengths := []int{0, 1, 7, 1000, 1 << 20}
	if raceEnabled {
		lengths[4] = 1<<16 + 5 // the race detector slows the children; in-process keeps 1<<20 at world 4
	}
	for world := 1; world <= 8; world++ {
		t.Run(fmt.Sprintf("world=%d", world), func(t *testing.T) {
			g := startChildren(t, world)
			if err := g.Send(loopback.Task{Kind: loopback.KindVerify, Generation: 1, TimeoutMS: 30000, Lengths: lengths, Seed: uint64(world)}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			reps, err := g.Collect(ctx, world)
			if err != nil {
				t.Fatal(err)
			}
			for rank, r := range reps {
				if r.Err != nil || r.Error != "" {
					t.Fatalf("rank %d: %v %s (stderr: %s)", rank, r.Err, r.Error, g.Stderr(rank))
				}
				for i, n := range lengths {
					if e := r.MaxAbsErr[i]; e > 1e-5*float64(world) {
						t.Errorf("rank %d length %d: max abs error %g", rank, n, e)
					}
					if r.Digest[i] != reps[0].Digest[i] {
						t.Errorf("length %d: rank %d's result differs from rank 0's", n, rank)
					}
				}
			}
		})
	}
}

// TestKilledOrStoppedProcessFailsSurvivors: a member killed (SIGKILL) or
// stopped (SIGSTOP, a stall: its links stay open) in the middle of a stream
// of all-reduces makes every other member return a PeerError within the
// deadline.
func TestKilledOrStoppedProcessFailsSurvivors(t *testing.T) {
	const world, victim = 4, 1
	const timeout = 1500 * time.Millisecond
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		t.Run(sig.String(), func(t *testing.T) {
			g := startChildren(t, world)
			if err := g.Send(loopback.Task{Kind: loopback.KindLoop, Generation: 3, TimeoutMS: int(timeout.Milliseconds()), Floats: 1 << 18}); err != nil {
				t.Fatal(err)
			}
			running := 0
			for running < world {
				select {
				case r := <-g.Reports:
					if r.Event != "running" {
						t.Fatalf("rank %d before running: %+v %v (stderr: %s)", r.Rank, r.Report, r.Err, g.Stderr(r.Rank))
					}
					running++
				case <-time.After(30 * time.Second):
					t.Fatal("children did not start")
				}
			}
			time.Sleep(100 * time.Millisecond) // well inside the stream of all-reduces
			killed := time.Now()
			if err := g.Signal(victim, sig); err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			for len(seen) < world-1 {
				select {
				case r := <-g.Reports:
					if r.Rank == victim {
						continue // the killed child's stdout closing
					}
					if !r.PeerFailed {
						t.Fatalf("rank %d: want a PeerError, got %+v %v", r.Rank, r.Report, r.Err)
					}
					if took := r.At.Sub(killed); took > timeout+5*time.Second {
						t.Errorf("rank %d reported %s after the %s, timeout %s", r.Rank, took, sig, timeout)
					}
					t.Logf("rank %d: peer rank %d failed, reported %s after %s, after %d all-reduces", r.Rank, r.FailedPeer, r.At.Sub(killed).Round(time.Millisecond), sig, r.Iterations)
					seen[r.Rank] = true
				case <-time.After(timeout + 10*time.Second):
					t.Fatalf("survivors still running %s after the %s: only %v reported", timeout+10*time.Second, sig, seen)
				}
			}
		})
	}
}
