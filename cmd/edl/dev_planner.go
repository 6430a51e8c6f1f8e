package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/edl-nomad/edl/planner/loop"
)

// plannerRun is edl dev's planner goroutine. It can be killed and replaced
// by a fresh loop (edl bench chaos does, to play a planner that dies
// mid-round and a successor that takes over from what Redis holds).
type plannerRun struct {
	make   func() (*loop.Loop, error)
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// startPlanner runs d.loop until ctx ends (or restartPlanner stops it); an
// error of its own ends edl dev.
func (d *devEnv) startPlanner(ctx context.Context) {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	d.planner.mu.Lock()
	d.planner.cancel, d.planner.done = cancel, done
	d.planner.mu.Unlock()
	pl := d.loop
	go func() {
		defer close(done)
		err := pl.Run(pctx)
		if pctx.Err() == nil || ctx.Err() != nil {
			d.errc <- err
		}
	}()
}

// restartPlanner cancels the running loop wherever it is (mid-round
// included), waits for it to return, and starts a new loop with nothing in
// memory from the old one.
func (d *devEnv) restartPlanner(ctx context.Context) error {
	d.planner.mu.Lock()
	cancel, done := d.planner.cancel, d.planner.done
	d.planner.mu.Unlock()
	cancel()
	<-done
	pl, err := d.planner.make()
	if err != nil {
		return fmt.Errorf("new planner loop: %w", err)
	}
	d.loop = pl
	d.startPlanner(ctx)
	return nil
}
