package nomadx

import (
	"context"
	"sync"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/hashicorp/nomad/api"
)

// DefaultWatchWait is how long one blocking query waits for a change.
const DefaultWatchWait = 5 * time.Minute

// watchGap is the least time between two calls of changed per table: a busy
// cluster's churn (other teams' allocations) wakes the planner at most a
// few times a second, and a burst of changes becomes one round.
const watchGap = 250 * time.Millisecond

// Watch calls changed whenever Nomad's allocations (any namespace) or
// nodes change (at most every 250 ms per table), until ctx ends: the
// planner loop wakes on a placement, a task exit, a stop or a drain
// instead of polling. It holds one blocking
// query per table (`index` = the last X-Nomad-Index, `wait` = wait, or
// DefaultWatchWait when 0), which Nomad answers within milliseconds of a
// change; a failed query is retried after the Retry backoff. changed must
// not block (planner Loop.Wake does not).
func (c *Cluster) Watch(ctx context.Context, wait time.Duration, changed func()) {
	if wait <= 0 {
		wait = DefaultWatchWait
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.watch(ctx, "allocations", wait, changed, func(q *api.QueryOptions) (uint64, error) {
			q.Namespace = "*"
			q.Params = map[string]string{"task_states": "false"}
			_, meta, err := c.client.Allocations().List(q)
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		})
	}()
	go func() {
		defer wg.Done()
		c.watch(ctx, "nodes", wait, changed, func(q *api.QueryOptions) (uint64, error) {
			_, meta, err := c.client.Nodes().List(q)
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		})
	}()
	wg.Wait()
}

// watch runs one table's blocking-query loop.
func (c *Cluster) watch(ctx context.Context, table string, wait time.Duration, changed func(), list func(*api.QueryOptions) (uint64, error)) {
	var index uint64
	fails := 0
	for ctx.Err() == nil {
		q := c.q(ctx)
		q.WaitIndex, q.WaitTime = index, wait
		next, err := list(q)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			d := backoff(c.cfg.Retry, fails)
			c.log.Debug("nomad watch", "table", table, "err", err, "retry_in", d)
			if periodic.Sleep(ctx, d) != nil {
				return
			}
			continue
		}
		fails = 0
		if index != 0 && next != index {
			changed()
			if periodic.Sleep(ctx, watchGap) != nil {
				return
			}
		}
		if next < index {
			// The index went backwards (a new leader, a restored
			// snapshot): start over, as Nomad's docs advise.
			next = 0
		}
		index = next
	}
}
