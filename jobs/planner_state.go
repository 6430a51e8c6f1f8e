package jobs

import (
	"errors"
	"time"
)

// PlannerState is what the planner keeps on a job's record so that a fresh
// planner (a restart, a takeover) finishes what the last one started: a
// finished job is torn down and its callback sent once, and attained
// service, throughput and cooldowns survive.
type PlannerState struct {
	// AttainedGPUSeconds is the service the job has had (GPU seconds;
	// worker seconds for CPU-only jobs), saved every so often.
	AttainedGPUSeconds float64 `json:"attained_gpu_seconds,omitempty"`
	// Throughput is measured samples/s by worker count.
	Throughput map[int]float64 `json:"throughput,omitempty"`
	// LastResize is when the planner last changed the job's worker count.
	LastResize time.Time `json:"last_resize,omitzero"`
	// LastReplace is when the planner last replaced one of its stragglers.
	LastReplace time.Time `json:"last_replace,omitzero"`
	// TornDown: the job is terminal and its workers were removed.
	TornDown bool `json:"torn_down,omitempty"`
	// Callback is where the completion callback is: "" (none due yet),
	// "sending" (claimed by the planner whose fence is CallbackFence),
	// "delivered" or "failed".
	Callback      string `json:"callback,omitempty"`
	CallbackFence int64  `json:"callback_fence,omitempty"`
	// Finished: the planner is done with this terminal job (torn down,
	// callback delivered or given up); it leaves the store's finished queue.
	Finished bool `json:"finished,omitempty"`
}

// Clone returns a deep copy (nil stays nil).
func (p *PlannerState) Clone() *PlannerState {
	if p == nil {
		return nil
	}
	c := *p
	if p.Throughput != nil {
		c.Throughput = make(map[int]float64, len(p.Throughput))
		for k, v := range p.Throughput {
			c.Throughput[k] = v
		}
	}
	return &c
}

// ErrFenced means a write came from a store fenced with an older fence than
// the one the fence key holds now: a planner that lost its lease
// (jobstore.Store.WithFence).
var ErrFenced = errors.New("fenced: another planner holds the lease")
