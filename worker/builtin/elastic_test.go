package builtin

import (
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/internal/workertest"
)

func TestStaticRunUsesEverySampleOnce(t *testing.T) {
	r := testenv.NewRedis(t)
	c := workertest.NewCluster(t, r, workertest.TestSpec(2, 2), 0)
	c.Start()
	c.Start()
	c.Finish(60 * time.Second)
	c.CheckExactlyOnce()
}

func TestScaleOutAndInMidEpoch(t *testing.T) {
	r := testenv.NewRedis(t)
	c := workertest.NewCluster(t, r, workertest.TestSpec(3, 2), 5*time.Millisecond)
	c.Start()
	c.Start()
	c.WaitWorld(2, 20*time.Second)
	c.WaitSteps(20, 20*time.Second)
	w3 := c.Start()
	c.WaitWorld(3, 20*time.Second)
	c.WaitSteps(20, 20*time.Second)
	c.Signal(w3, syscall.SIGTERM)
	if err := c.Wait(w3, 20*time.Second); err != nil {
		t.Fatalf("graceful leave of %s: %v", w3, err)
	}
	c.WaitWorld(2, 20*time.Second)
	c.Finish(60 * time.Second)
	c.CheckExactlyOnce()
}

func TestSIGKILLOfWorkerAndOfLeader(t *testing.T) {
	r := testenv.NewRedis(t)
	c := workertest.NewCluster(t, r, workertest.TestSpec(3, 2), 5*time.Millisecond)
	for range 4 {
		c.Start()
	}
	c.WaitWorld(4, 20*time.Second)
	c.WaitSteps(20, 20*time.Second)
	var victim string
	for _, id := range c.Gen().Members {
		if id != c.LeaderID() {
			victim = id
			break
		}
	}
	c.Signal(victim, syscall.SIGKILL)
	c.WaitWorld(3, 20*time.Second)
	c.WaitSteps(20, 20*time.Second)
	leader := c.LeaderID()
	c.Signal(leader, syscall.SIGKILL)
	c.WaitFor("a new leader", 20*time.Second, func() bool { l := c.LeaderID(); return l != "" && l != leader })
	c.WaitWorld(2, 20*time.Second)
	c.WaitSteps(20, 20*time.Second)
	c.Finish(60 * time.Second)
	c.CheckExactlyOnce()
}

func TestRedisRestart(t *testing.T) {
	r := testenv.NewRedisServer(t)
	c := workertest.NewCluster(t, r, workertest.TestSpec(3, 3), 5*time.Millisecond)
	for range 3 {
		c.Start()
	}
	c.WaitWorld(3, 20*time.Second)
	c.WaitSteps(30, 20*time.Second)
	if err := r.Server.Restart(); err != nil {
		t.Fatal(err)
	}
	c.WaitSteps(30, 30*time.Second)
	c.Finish(60 * time.Second)
	c.CheckExactlyOnce()
}
