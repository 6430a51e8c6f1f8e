package builtin

import (
	"context"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// TestRandomScaleAndKillEvents applies 20 random joins, graceful leaves and
// SIGKILLs (leader included) to one job and checks the sample accounting.
func TestRandomScaleAndKillEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("long multi-process test")
	}
	seed := workertest.TestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	r := testenv.NewRedis(t)
	c := workertest.NewCluster(t, r, workertest.TestSpec(14, 2), 3*time.Millisecond)
	alive := map[string]bool{}
	for range 3 {
		alive[c.Start()] = true
	}
	c.WaitWorld(3, 20*time.Second)
	pick := func() string {
		ids := make([]string, 0, len(alive))
		for id := range alive {
			ids = append(ids, id)
		}
		slices.Sort(ids) // map order is random: a seed must replay the same choice
		return ids[rng.IntN(len(ids))]
	}
	for i := range 20 {
		c.WaitSteps(8, 30*time.Second)
		switch ev := rng.IntN(3); {
		case ev == 0 && len(alive) < 6 || len(alive) <= 2:
			id := c.Start()
			alive[id] = true
			t.Logf("event %d: start %s", i, id)
		case ev == 1:
			id := pick()
			// A SIGTERM in the first milliseconds of a process, before the Go
			// runtime has run TestMain and installed the handler, kills it
			// (any program's fate); wait until the worker has said it exists.
			cc := c.Coord()
			c.WaitFor(id+" registered", 30*time.Second, func() bool {
				ms, err := cc.Members(context.Background())
				_, ok := ms[id]
				return err == nil && ok
			})
			c.Signal(id, syscall.SIGTERM)
			delete(alive, id)
			t.Logf("event %d: SIGTERM %s", i, id)
		default:
			id := pick()
			c.Signal(id, syscall.SIGKILL)
			delete(alive, id)
			t.Logf("event %d: SIGKILL %s (leader %s)", i, id, c.LeaderID())
		}
	}
	c.WaitSteps(8, 30*time.Second)
	c.Finish(90 * time.Second)
	c.CheckExactlyOnce()
}
