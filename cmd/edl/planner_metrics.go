package main

import (
	"sync/atomic"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/planner/loop"
)

// plannerMetrics connects the planner loop to the API's /metrics
// (edl_planner_rounds_total, edl_planner_decide_seconds) whichever of the
// two is built first.
type plannerMetrics struct {
	loop atomic.Pointer[loop.Loop]
	srv  atomic.Pointer[api.Server]
}

func (m *plannerMetrics) rounds() int64 {
	if l := m.loop.Load(); l != nil {
		return l.Rounds()
	}
	return 0
}

func (m *plannerMetrics) decide(d time.Duration) {
	if s := m.srv.Load(); s != nil {
		s.ObserveDecide(d)
	}
}
