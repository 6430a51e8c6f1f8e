package worker

import (
	"syscall"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
)

func TestStaticRunUsesEverySampleOnce(t *testing.T) {
	r := testenv.NewRedis(t)
	c := newCluster(t, r, testSpec(2, 2), 0)
	c.start()
	c.start()
	c.finish(60 * time.Second)
	c.checkExactlyOnce()
}

func TestScaleOutAndInMidEpoch(t *testing.T) {
	r := testenv.NewRedis(t)
	c := newCluster(t, r, testSpec(3, 2), 5*time.Millisecond)
	c.start()
	c.start()
	c.waitWorld(2, 20*time.Second)
	c.waitSteps(20, 20*time.Second)
	w3 := c.start()
	c.waitWorld(3, 20*time.Second)
	c.waitSteps(20, 20*time.Second)
	c.signal(w3, syscall.SIGTERM)
	if err := c.wait(w3, 20*time.Second); err != nil {
		t.Fatalf("graceful leave of %s: %v", w3, err)
	}
	c.waitWorld(2, 20*time.Second)
	c.finish(60 * time.Second)
	c.checkExactlyOnce()
}

func TestSIGKILLOfWorkerAndOfLeader(t *testing.T) {
	r := testenv.NewRedis(t)
	c := newCluster(t, r, testSpec(3, 2), 5*time.Millisecond)
	for range 4 {
		c.start()
	}
	c.waitWorld(4, 20*time.Second)
	c.waitSteps(20, 20*time.Second)
	var victim string
	for _, id := range c.gen().Members {
		if id != c.leaderID() {
			victim = id
			break
		}
	}
	c.signal(victim, syscall.SIGKILL)
	c.waitWorld(3, 20*time.Second)
	c.waitSteps(20, 20*time.Second)
	leader := c.leaderID()
	c.signal(leader, syscall.SIGKILL)
	c.waitFor("a new leader", 20*time.Second, func() bool { l := c.leaderID(); return l != "" && l != leader })
	c.waitWorld(2, 20*time.Second)
	c.waitSteps(20, 20*time.Second)
	c.finish(60 * time.Second)
	c.checkExactlyOnce()
}

func TestRedisRestart(t *testing.T) {
	r := testenv.NewRedisServer(t)
	c := newCluster(t, r, testSpec(3, 3), 5*time.Millisecond)
	for range 3 {
		c.start()
	}
	c.waitWorld(3, 20*time.Second)
	c.waitSteps(30, 20*time.Second)
	if err := r.Server.Restart(); err != nil {
		t.Fatal(err)
	}
	c.waitSteps(30, 30*time.Second)
	c.finish(60 * time.Second)
	c.checkExactlyOnce()
}
