package nomadtest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/nomad/api"
)

func cloneJob(j *api.Job) *api.Job {
	b, err := json.Marshal(j)
	if err != nil {
		panic(err)
	}
	var out api.Job
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return &out
}

func taskEvent(typ, msg string, now int64, exit int) *api.TaskEvent {
	ev := &api.TaskEvent{Type: typ, Time: now, DisplayMessage: msg, Details: map[string]string{}, ExitCode: exit}
	switch typ {
	case api.TaskTerminated:
		ev.Details = map[string]string{"exit_code": fmt.Sprint(exit), "signal": "0", "oom_killed": "false"}
	case api.TaskSetup:
		ev.Details = map[string]string{"message": msg}
		ev.Message = msg
	}
	return ev
}

// setRunning moves a pending allocation to running. Callers hold mu.
func (s *Server) setRunning(a *allocState) {
	now := s.now()
	a.a.ClientStatus, a.a.ClientDescription = "running", "Tasks are running"
	for _, ts := range a.a.TaskStates {
		ts.State = "running"
		ts.StartedAt = time.Unix(0, now).UTC()
		ts.Events = append(ts.Events,
			taskEvent(api.TaskSetup, "Building Task Directory", now, 0),
			taskEvent(api.TaskStarted, "Task started by client", now, 0))
	}
	a.a.ModifyIndex, a.a.ModifyTime = s.index, now
}

// setFinished ends an allocation with a client status. killed says it was
// stopped by the server (kill_signal, then exit). Callers hold mu.
func (s *Server) setFinished(a *allocState, status string, exit int, killed bool) {
	s.freed++
	now := s.now()
	a.a.ClientStatus = status
	a.a.ClientDescription = "All tasks have completed"
	if status == "failed" {
		a.a.ClientDescription = "Failed tasks"
	}
	for _, ts := range a.a.TaskStates {
		if killed {
			kt := s.killTimeout(a)
			ev := taskEvent(api.TaskKilling, fmt.Sprintf("Sent interrupt. Waiting %s before force killing", kt), now, 0)
			ev.Details = map[string]string{"kill_timeout": kt.String()}
			ev.KillTimeout = kt
			ts.Events = append(ts.Events, ev)
		}
		ts.Events = append(ts.Events, taskEvent(api.TaskTerminated, fmt.Sprintf("Exit Code: %d", exit), now, exit))
		if killed {
			ts.Events = append(ts.Events, taskEvent(api.TaskKilled, "Task successfully killed", now, 0))
		}
		ts.State, ts.Failed = "dead", status == "failed"
		ts.FinishedAt = time.Unix(0, now).UTC()
	}
	a.a.ModifyIndex, a.a.ModifyTime = s.index, now
}

// killTimeout is the first task's kill_timeout. Callers hold mu.
func (s *Server) killTimeout(a *allocState) time.Duration {
	for _, tg := range a.a.Job.TaskGroups {
		if *tg.Name == a.a.TaskGroup {
			for _, t := range tg.Tasks {
				if t.KillTimeout != nil {
					return *t.KillTimeout
				}
			}
		}
	}
	return 5 * time.Second
}

// clientUpdate applies a client-side change to one allocation.
func (s *Server) clientUpdate(id string, f func(*allocState) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return fmt.Errorf("nomadtest: no allocation %s", id)
	}
	s.bump()
	if err := f(a); err != nil {
		return err
	}
	if js := s.jobs[jobKey(a.a.Namespace, a.a.JobID)]; js != nil {
		s.updateJobStatus(js)
	}
	s.checkDrains()
	s.unblock()
	return nil
}

// MarkRunning starts a pending allocation (ManualClient).
func (s *Server) MarkRunning(allocID string) error {
	return s.clientUpdate(allocID, func(a *allocState) error {
		if a.a.ClientStatus != "pending" {
			return fmt.Errorf("nomadtest: allocation %s is %s, not pending", allocID, a.a.ClientStatus)
		}
		s.setRunning(a)
		return nil
	})
}

// MarkComplete ends an allocation with exit code 0. A batch allocation that
// completes on its own is not replaced until the job's next version.
func (s *Server) MarkComplete(allocID string) error {
	return s.clientUpdate(allocID, func(a *allocState) error {
		if terminalClient(a.a.ClientStatus) {
			return fmt.Errorf("nomadtest: allocation %s already %s", allocID, a.a.ClientStatus)
		}
		s.setFinished(a, "complete", 0, a.a.DesiredStatus == "stop")
		return nil
	})
}

// MarkFailed ends an allocation with a non-zero exit code after its
// restarts. When the group's reschedule policy has attempts left, a
// replacement is placed under the same name index (immediately: the policy's
// delay is not modelled).
func (s *Server) MarkFailed(allocID string, exitCode int) error {
	return s.clientUpdate(allocID, func(a *allocState) error {
		if terminalClient(a.a.ClientStatus) {
			return fmt.Errorf("nomadtest: allocation %s already %s", allocID, a.a.ClientStatus)
		}
		s.setFinished(a, "failed", exitCode, false)
		s.reschedule(a)
		return nil
	})
}

// reschedule places a replacement for a failed allocation when its policy
// allows, after the policy's delay (times TimeScale; at once with Sync).
// Callers hold mu.
func (s *Server) reschedule(a *allocState) {
	js := s.jobs[jobKey(a.a.Namespace, a.a.JobID)]
	if js == nil || a.a.DesiredStatus != "run" || (js.job.Stop != nil && *js.job.Stop) {
		return
	}
	for _, tg := range js.job.TaskGroups {
		if *tg.Name != a.a.TaskGroup {
			continue
		}
		rp := tg.ReschedulePolicy
		done := 0
		if a.a.RescheduleTracker != nil {
			done = len(a.a.RescheduleTracker.Events)
		}
		if rp == nil || (!(rp.Unlimited != nil && *rp.Unlimited) && done >= intOr(rp.Attempts, 0)) {
			return
		}
		delay := time.Duration(0)
		if rp.Delay != nil {
			delay = s.scaled(*rp.Delay)
		}
		s.after(delay, func() {
			if s.jobs[jobKey(a.a.Namespace, a.a.JobID)] != js || a.a.NextAllocation != "" || (js.job.Stop != nil && *js.job.Stop) {
				return
			}
			p := s.place(js.job, tg)
			if p.node == nil {
				return
			}
			e := s.newEval(js, "alloc-failure")
			n := s.newAlloc(js, tg, a.index, p, e.ID)
			tr := &api.RescheduleTracker{}
			if a.a.RescheduleTracker != nil {
				tr.Events = append(tr.Events, a.a.RescheduleTracker.Events...)
			}
			tr.Events = append(tr.Events, &api.RescheduleEvent{RescheduleTime: s.now(), PrevAllocID: a.a.ID, PrevNodeID: a.a.NodeID})
			n.a.RescheduleTracker = tr
			n.a.PreviousAllocation = a.a.ID
			a.a.NextAllocation = n.a.ID
			s.finishEval(e, js)
			s.updateJobStatus(js)
		})
	}
}

// SetDeploymentStatus sets the status of a service job's latest deployment
// ("running" blocks scaling; "successful", "failed" or "cancelled" end it).
func (s *Server) SetDeploymentStatus(namespace, jobID, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobs[jobKey(namespace, jobID)]
	if js == nil || js.deployment == nil {
		return fmt.Errorf("nomadtest: no deployment for %s/%s", namespace, jobID)
	}
	js.deployment.Status = status
	js.deployment.ModifyIndex = s.bump()
	return nil
}

// Allocations returns a copy of a job's allocations, oldest first.
func (s *Server) Allocations(namespace, jobID string) []api.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []api.Allocation
	for _, a := range s.sortedAllocs(func(a *allocState) bool { return a.a.JobID == jobID && a.a.Namespace == namespace }) {
		out = append(out, *a.a)
	}
	return out
}

// Job returns the stored job, or nil.
func (s *Server) Job(namespace, jobID string) *api.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	if js := s.jobs[jobKey(namespace, jobID)]; js != nil {
		return cloneJob(js.job)
	}
	return nil
}

// Fault is an injected failure or delay for matching requests.
type Fault struct {
	Method     string // empty matches any
	PathPrefix string // e.g. "/v1/job/"; empty matches any
	Status     int    // 0 passes the request on after Delay
	Body       string // plain-text body for Status
	Delay      time.Duration
	Times      int // how many requests it hits; 0 means 1
}

// AddFault queues a fault; faults apply in the order added.
func (s *Server) AddFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Times <= 0 {
		f.Times = 1
	}
	s.faults = append(s.faults, &f)
}
