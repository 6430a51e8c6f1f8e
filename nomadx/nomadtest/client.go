package nomadtest

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/hashicorp/nomad/api"
)

// restartJitter is Nomad's restart tracker jitter: each restart waits the
// policy's delay plus up to a quarter of it more.
const restartJitter = 0.25

// drainState is a node drain in progress.
type drainState struct {
	strategy *api.DrainStrategy
	deadline bool   // the deadline passed: remaining allocations were migrated
	cancel   func() // drops the deadline timer
}

// ExitTask makes an allocation's task exit on its own with exitCode, and
// has the fake client apply the group's restart policy as Nomad's does:
// exit 0 completes the allocation (batch: not restarted, not replaced in
// this job version); a non-zero exit restarts the task after the policy's
// delay plus up to 25% jitter (times TimeScale) while attempts remain in
// the interval, the allocation client-pending meanwhile; once they are used
// up, mode "fail" fails the allocation (and the reschedule policy may
// replace it) and mode "delay" restarts it when the interval is over.
func (s *Server) ExitTask(allocID string, exitCode int) error {
	return s.clientUpdate(allocID, func(a *allocState) error {
		if terminalClient(a.a.ClientStatus) {
			return fmt.Errorf("nomadtest: allocation %s already %s", allocID, a.a.ClientStatus)
		}
		s.taskExited(a, exitCode)
		return nil
	})
}

// taskExited applies the restart policy to an exit. Callers hold mu.
func (s *Server) taskExited(a *allocState, exitCode int) {
	if exitCode == 0 || a.a.DesiredStatus != "run" {
		s.setFinished(a, "complete", exitCode, false)
		return
	}
	rp := s.restartPolicy(a)
	now := s.cfg.Now()
	interval := time.Duration(0)
	if rp.Interval != nil {
		interval = *rp.Interval
	}
	var recent []time.Time
	for _, t := range a.restarts {
		if interval <= 0 || now.Sub(t) < interval {
			recent = append(recent, t)
		}
	}
	a.restarts = recent
	delay := time.Duration(0)
	if rp.Delay != nil {
		delay = *rp.Delay
	}
	reason := "Restart within policy"
	if len(recent) >= intOr(rp.Attempts, 0) {
		if rp.Mode == nil || *rp.Mode != "delay" {
			s.setFinished(a, "failed", exitCode, false)
			for _, ts := range a.a.TaskStates {
				ts.Events = append(ts.Events, &api.TaskEvent{Type: api.TaskNotRestarting, Time: s.now(),
					DisplayMessage: fmt.Sprintf("Exceeded allowed attempts %d in interval %s and mode is \"fail\"", intOr(rp.Attempts, 0), interval),
					Details:        map[string]string{"fails_task": "true", "restart_reason": "Exceeded allowed attempts"}, FailsTask: true})
			}
			s.reschedule(a)
			return
		}
		// mode "delay": wait out the interval, then start over.
		delay = interval - now.Sub(recent[0])
		reason = "Exceeded allowed attempts, applying a delay"
		a.restarts = nil
	}
	wait := delay
	if delay > 0 {
		wait += time.Duration(rand.Int64N(int64(float64(delay)*restartJitter) + 1))
	}
	wait = s.scaled(wait)
	a.restarts = append(a.restarts, now)
	n := s.now()
	a.a.ClientStatus, a.a.ClientDescription = "pending", "No tasks have started"
	for _, ts := range a.a.TaskStates {
		ts.State = "pending"
		ts.Restarts++
		ts.LastRestart = time.Unix(0, n).UTC()
		ts.Events = append(ts.Events, taskEvent(api.TaskTerminated, fmt.Sprintf("Exit Code: %d", exitCode), n, exitCode),
			&api.TaskEvent{Type: api.TaskRestarting, Time: n, DisplayMessage: "Task restarting in " + wait.String(),
				StartDelay: int64(wait), RestartReason: reason,
				Details: map[string]string{"restart_reason": reason, "start_delay": fmt.Sprint(int64(wait))}})
	}
	a.a.ModifyIndex, a.a.ModifyTime = s.index, n
	if s.cfg.Sync || s.cfg.ManualClient {
		// The caller drives the client: MarkRunning starts it again.
		return
	}
	s.after(wait, func() {
		if a.a.ClientStatus == "pending" && a.a.DesiredStatus == "run" {
			s.setRunning(a)
			s.updateJobStatusOf(a)
		}
	})
}

// restartPolicy is the task's (or its group's) restart policy. Callers
// hold mu.
func (s *Server) restartPolicy(a *allocState) *api.RestartPolicy {
	for _, tg := range a.a.Job.TaskGroups {
		if *tg.Name != a.a.TaskGroup {
			continue
		}
		for _, t := range tg.Tasks {
			if t.RestartPolicy != nil {
				return t.RestartPolicy
			}
		}
		if tg.RestartPolicy != nil {
			return tg.RestartPolicy
		}
	}
	return &api.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")}
}

// Signals lists the signals sent to an allocation through
// /v1/client/allocation/:id/signal, oldest first.
func (s *Server) Signals(allocID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.allocs[allocID]; a != nil {
		return append([]string(nil), a.signals...)
	}
	return nil
}

// signal delivers a signal to an allocation's task. The fake task behaves
// like `edl worker`: SIGTERM or SIGINT makes it leave gracefully and exit
// 0 ExitDelay later (with ManualClient the test ends it); other signals are
// recorded only.
func (s *Server) signal(id string, req *api.AllocSignalRequest) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return nil, errf(http.StatusNotFound, "Unknown allocation %q", id)
	}
	if terminalClient(a.a.ClientStatus) {
		return nil, errf(http.StatusInternalServerError, "Task not running")
	}
	if req.Task != "" {
		if _, ok := a.a.TaskStates[req.Task]; !ok {
			return nil, errf(http.StatusBadRequest, "Failed to signal task: %s, err: task not found", req.Task)
		}
	}
	sig := req.Signal
	if sig == "" {
		sig = "SIGKILL"
	}
	a.signals = append(a.signals, sig)
	ix := s.bump()
	if (sig == "SIGTERM" || sig == "SIGINT") && !s.cfg.ManualClient {
		s.after(s.cfg.ExitDelay, func() {
			if !terminalClient(a.a.ClientStatus) {
				s.setFinished(a, "complete", 0, false)
				s.updateJobStatusOf(a)
			}
		})
	}
	return map[string]any{"Index": ix}, nil
}

// Drain starts draining a node, as `nomad node drain -enable -deadline`
// does: the node becomes ineligible at once and its batch allocations keep
// running until deadline (Nomad migrates batch work only at the deadline);
// then the remaining ones are stopped ("alloc is being migrated") and
// replaced under the same name index on other nodes where they fit. The
// drain completes (Drain false, LastDrain complete, the node stays
// ineligible) once no allocation runs on the node, which may be before the
// deadline when the jobs move their work off themselves. deadline < 0
// forces the migration at once; 0 means no deadline.
func (s *Server) Drain(nodeName string, deadline time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n *node
	for _, x := range s.nodes {
		if x.spec.Name == nodeName {
			n = x
		}
	}
	if n == nil {
		return fmt.Errorf("nomadtest: no node %q", nodeName)
	}
	now := s.cfg.Now()
	st := &api.DrainStrategy{DrainSpec: api.DrainSpec{Deadline: deadline}, StartedAt: now}
	if deadline > 0 {
		st.ForceDeadline = now.Add(deadline)
	}
	n.spec.Drain = true
	n.drain = &drainState{strategy: st}
	n.modifyIndex = s.bump()
	switch {
	case deadline < 0:
		s.drainDeadline(n)
	case deadline > 0:
		n.drain.cancel = s.timer(deadline, func() { s.drainDeadline(n) })
	}
	s.checkDrains()
	s.unblock()
	return nil
}

// drainDeadline migrates what still runs on a draining node. Callers hold
// mu.
func (s *Server) drainDeadline(n *node) {
	if n.drain == nil || n.drain.deadline {
		return
	}
	n.drain.deadline = true
	for _, a := range s.sortedAllocs(func(a *allocState) bool { return a.a.NodeID == n.id && !a.terminal() }) {
		js := s.jobs[jobKey(a.a.Namespace, a.a.JobID)]
		a.a.DesiredTransition = api.DesiredTransition{Migrate: ptr(true)}
		evalID := ""
		if js != nil {
			e := s.newEval(js, "node-drain")
			evalID = e.ID
			s.finishEval(e, js)
		}
		s.stopAlloc(a, "alloc is being migrated")
		if js != nil && (js.job.Stop == nil || !*js.job.Stop) {
			s.after(s.cfg.PlacementDelay, func() { s.replace(js, a, evalID) })
		}
	}
	s.checkDrains()
}

// checkDrains completes drains whose node runs nothing any more. Callers
// hold mu.
func (s *Server) checkDrains() {
	for _, n := range s.nodes {
		if n.drain == nil {
			continue
		}
		busy := false
		for _, a := range s.allocs {
			if a.a.NodeID == n.id && !terminalClient(a.a.ClientStatus) {
				busy = true
				break
			}
		}
		if busy {
			continue
		}
		if n.drain.cancel != nil {
			n.drain.cancel()
		}
		n.lastDrain = &api.DrainMetadata{StartedAt: n.drain.strategy.StartedAt, UpdatedAt: s.cfg.Now(), Status: api.DrainStatusComplete}
		n.drain = nil
		n.spec.Drain = false
		n.spec.Ineligible = true
		n.modifyIndex = s.index
	}
}
