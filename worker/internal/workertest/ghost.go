package workertest

import (
	"context"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/coord"
)

// Ghost registers a ready member id of job that renews its heartbeat
// until a generation names it, then stops without leaving: a worker that
// died (SIGKILLed, its node gone) once admitted. Its lease is 2 s.
func Ghost(t *testing.T, r *testenv.Redis, job, id string) {
	t.Helper()
	co, err := coord.New(r.Client, coord.Config{Prefix: r.Prefix, Job: job, Worker: id, Lease: 2 * time.Second, Heartbeat: 200 * time.Millisecond}, TestLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := co.SetMember(ctx, coord.Member{Addr: "127.0.0.1:1", State: coord.Ready, Since: time.Now()}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			if g, err := co.ReadGen(ctx); err == nil && g != nil && g.Rank(id) >= 0 {
				return // admitted: it dies now
			}
			_ = co.Heartbeat(ctx)
			time.Sleep(200 * time.Millisecond)
		}
	}()
}
