package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The five faults of edl bench chaos, one method each.

func (ch *chaos) workerKills(ctx context.Context, row *chaosRow, ids *idList) error {
	for i := range 2 {
		ch.submit(ctx, row, ids, chaosJob("worker-kills", i, 1, 2, 100000, 2))
	}
	for row.Faults < 4 {
		if !pause(ctx, 1500*time.Millisecond) {
			return ctx.Err()
		}
		pids := ch.workerPids(ids.all())
		if len(pids) == 0 {
			if ch.allTerminal(ctx, ids.all()) {
				row.Note = "jobs finished before every kill"
				break
			}
			continue
		}
		if syscall.Kill(pids[rand.IntN(len(pids))], syscall.SIGKILL) == nil {
			row.Faults++
		}
	}
	return nil
}

func (ch *chaos) sigstop(ctx context.Context, row *chaosRow, ids *idList) error {
	ch.submit(ctx, row, ids, chaosJob("sigstop-worker", 0, 2, 2, 100000, 2))
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if !pause(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
		pids := ch.workerPids(ids.all())
		if len(pids) < 2 || !ch.stepping(ctx, ids.all()[0]) {
			continue
		}
		victim := pids[rand.IntN(len(pids))]
		if syscall.Kill(victim, syscall.SIGSTOP) != nil {
			continue
		}
		row.Faults++
		pause(ctx, 5*time.Second)
		_ = syscall.Kill(victim, syscall.SIGCONT)
		return nil
	}
	row.Note = "no two workers training within 60s: nothing stopped"
	return nil
}

func (ch *chaos) redisRestart(ctx context.Context, row *chaosRow, ids *idList) error {
	for i := range 2 {
		ch.submit(ctx, row, ids, chaosJob("redis-restart", i, 1, 2, 100000, 2))
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && !ch.stepping(ctx, ids.all()[0]) {
		if !pause(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	pid := ch.d.Redis.Pid()
	ch.c.redisDown.Store(true)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		ch.c.redisDown.Store(false)
		return fmt.Errorf("kill redis-server: %w", err)
	}
	row.Faults++
	// Down until a read is answered again by the restarted server.
	back := time.Now().Add(60 * time.Second)
	for {
		if ch.d.Redis.Pid() != pid {
			if code, _ := ch.c.do(ctx, http.MethodGet, "/v1/jobs/"+ids.all()[0], nil, nil); code == http.StatusOK {
				break
			}
		}
		select {
		case <-ch.d.Redis.Failed():
			ch.c.redisDown.Store(false)
			return fmt.Errorf("edl dev's redis-server was not restarted: %v", ch.d.Redis.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(back) {
			ch.c.redisDown.Store(false)
			return fmt.Errorf("API not answering 60s after the redis-server restart")
		}
	}
	ch.c.redisDown.Store(false)
	return nil
}

func (ch *chaos) plannerRestart(ctx context.Context, row *chaosRow, ids *idList) error {
	for i := range 2 {
		ch.submit(ctx, row, ids, chaosJob("planner-restart", i, 1, 2, 100000, 2))
	}
	for range 3 {
		// A random point within rounds of 200 ms: often mid-round.
		if !pause(ctx, 1500*time.Millisecond+time.Duration(rand.IntN(200))*time.Millisecond) {
			return ctx.Err()
		}
		if err := ch.d.RestartPlanner(ctx); err != nil {
			return err
		}
		row.Faults++
	}
	return nil
}

func (ch *chaos) submitBurst(ctx context.Context, row *chaosRow, ids *idList) error {
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= ch.burst {
					return
				}
				var local chaosRow
				ch.submit(ctx, &local, ids, chaosJob("submit-burst", i, 1, 1, 400, 1))
				mu.Lock()
				row.Acknowledged += local.Acknowledged
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	row.Faults = 1
	// Let some run, then cancel the rest, as a user who over-submitted.
	pause(ctx, 15*time.Second)
	for _, id := range ids.all() {
		ch.c.do(ctx, http.MethodDelete, "/v1/jobs/"+id, nil, nil) // 409 for the finished ones
	}
	return nil
}
