package nomadtest

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/nomad/api"
)

// apiError is a Nomad error answer: a status and a plain-text body.
type apiError struct {
	status int
	body   string
	// unindexed: the agent answers before reading its state, so a read's
	// X-Nomad-Index is 0 (a scale status of an unknown job).
	unindexed bool
}

func errf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, body: fmt.Sprintf(format, args...)}
}

func ptr[T any](v T) *T { return &v }

// newEval records a completed evaluation for a job. Callers hold mu.
func (s *Server) newEval(js *jobState, trigger string) *api.Evaluation {
	now := s.now()
	e := &api.Evaluation{
		ID: newID(), Priority: intOr(js.job.Priority, 50), Type: *js.job.Type, TriggeredBy: trigger,
		Namespace: *js.job.Namespace, JobID: *js.job.ID, JobModifyIndex: js.jobModify,
		Status: "complete", QueuedAllocations: map[string]int{}, SnapshotIndex: s.index,
		CreateIndex: s.index, ModifyIndex: s.index, CreateTime: now, ModifyTime: now,
	}
	s.evals[e.ID] = e
	return e
}

// evaluate runs the scheduler for a job's evaluation: at once with Sync,
// otherwise PlacementDelay later (the write answered with the evaluation
// pending, as Nomad's does). The job is looked up again then: a newer
// register or a purge may have happened. Callers hold mu.
func (s *Server) evaluate(key string, e *api.Evaluation) {
	if s.cfg.Sync {
		s.bump()
	} else {
		e.Status = "pending"
	}
	s.after(s.placementDelay(), func() {
		js := s.jobs[key]
		if js == nil {
			e.Status, e.ModifyIndex = "cancelled", s.index
			return
		}
		s.reconcile(js, e.ID)
		s.finishEval(e, js)
	})
}

// finishEval records the queued counts once placement ran. Callers hold mu.
func (s *Server) finishEval(e *api.Evaluation, js *jobState) {
	if e.Status == "pending" {
		e.Status = "complete"
	}
	for _, tg := range js.job.TaskGroups {
		e.QueuedAllocations[*tg.Name] = js.queued[*tg.Name]
	}
	e.ModifyIndex, e.ModifyTime = s.index, s.now()
}

// recordFailure notes a failed placement on the evaluation and creates the
// blocked evaluation, as Nomad does. Callers hold mu.
func (s *Server) recordFailure(js *jobState, group string, p placement, evalID string) {
	m := &api.AllocationMetric{
		NodesEvaluated: p.evaluated, NodesInPool: len(s.nodes), NodesExhausted: p.evaluated - p.nFiltered, NodesFiltered: p.nFiltered,
		NodesAvailable:     map[string]int{},
		DimensionExhausted: p.exhausted,
		ConstraintFiltered: p.filtered,
		ResourcesExhausted: map[string]*api.Resources{},
	}
	for _, tg := range js.job.TaskGroups {
		if *tg.Name == group {
			for _, t := range tg.Tasks {
				m.ResourcesExhausted[t.Name] = &api.Resources{CPU: ptr(0), Cores: ptr(0), DiskMB: ptr(0), IOPS: ptr(0), MemoryMB: ptr(0), MemoryMaxMB: ptr(0)}
			}
		}
	}
	for _, n := range s.nodes {
		if n.eligible() {
			m.NodesAvailable[n.spec.Datacenter]++
		}
	}
	if len(p.filtered) == 0 {
		m.ConstraintFiltered = nil
	}
	if len(p.exhausted) == 0 {
		m.DimensionExhausted = nil
	}
	if e := s.evals[evalID]; e != nil && e.Status != "blocked" {
		if e.FailedTGAllocs == nil {
			e.FailedTGAllocs = map[string]*api.AllocationMetric{}
		}
		e.FailedTGAllocs[group] = m
	}
	if js.blockedEval == "" {
		b := s.newEval(js, "queued-allocs")
		b.Status = "blocked"
		b.StatusDescription = "created to place remaining allocations"
		b.PreviousEval = evalID
		b.FailedTGAllocs = map[string]*api.AllocationMetric{group: m}
		b.QueuedAllocations = nil
		b.ClassEligibility = map[string]bool{}
		for _, n := range s.nodes {
			b.ClassEligibility[n.computedClass()] = true
		}
		js.blockedEval = b.ID
		if e := s.evals[evalID]; e != nil {
			e.BlockedEval = b.ID
		}
	}
}

// batchUpdateError is the recorded validation text for a batch job with an
// update block.
func batchUpdateError(group string) *apiError {
	return errf(http.StatusInternalServerError,
		"1 error occurred:\n\t* Task group %s validation failed: 1 error occurred:\n\t* Job type \"batch\" does not allow update block\n\n\n\n", group)
}

// register stores a job (a new version when it exists) and schedules it.
func (s *Server) register(req *api.JobRegisterRequest, ns string) (map[string]any, *apiError) {
	job := req.Job
	if job == nil || job.ID == nil || *job.ID == "" {
		return nil, errf(http.StatusBadRequest, "Job ID does not match")
	}
	job = cloneJob(job)
	if job.Namespace == nil || *job.Namespace == "" {
		job.Namespace = &ns
	}
	if job.Type == nil {
		job.Type = ptr("service")
	}
	if *job.Type == "batch" {
		for _, tg := range job.TaskGroups {
			if tg.Update != nil || (job.Update != nil && intOr(job.Update.MaxParallel, 0) > 0) {
				return nil, batchUpdateError(*tg.Name)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := jobKey(*job.Namespace, *job.ID)
	old := s.jobs[key]
	if req.EnforceIndex {
		switch {
		case req.JobModifyIndex == 0 && old != nil:
			return nil, errf(http.StatusInternalServerError, "Enforcing job modify index 0: job already exists")
		case req.JobModifyIndex != 0 && old == nil:
			return nil, errf(http.StatusInternalServerError, "Enforcing job modify index %d: job does not exist", req.JobModifyIndex)
		case old != nil && req.JobModifyIndex != old.jobModify:
			return nil, errf(http.StatusInternalServerError,
				"Enforcing job modify index %d: job exists with conflicting job modify index: %d", req.JobModifyIndex, old.jobModify)
		}
	}
	ix := s.bump()
	js := &jobState{createIndex: ix, submitTime: s.now(), events: map[string][]api.ScalingEvent{}, queued: map[string]int{}}
	if old != nil {
		js.createIndex, js.version = old.createIndex, old.version+1
		js.events, js.blockedEval = old.events, old.blockedEval
	}
	js.jobModify, js.modifyIndex = ix, ix
	js.job = s.withDefaults(job, js)
	s.jobs[key] = js
	if *job.Type == "service" {
		for _, tg := range job.TaskGroups {
			if tg.Update != nil && intOr(tg.Update.MaxParallel, 0) > 0 {
				js.deployment = &api.Deployment{ID: newID(), Namespace: *job.Namespace, JobID: *job.ID,
					JobVersion: js.version, JobModifyIndex: ix, JobCreateIndex: js.createIndex,
					Status: "running", StatusDescription: "Deployment is running", CreateIndex: ix, ModifyIndex: ix}
			}
		}
	}
	e := s.newEval(js, "job-register")
	s.evaluate(key, e)
	return map[string]any{
		"EvalCreateIndex": e.CreateIndex, "EvalID": e.ID, "Index": ix, "JobModifyIndex": ix,
		"KnownLeader": false, "LastContact": 0, "NextToken": "", "Warnings": "",
	}, nil
}

// withDefaults fills what the Nomad server fills on register (see
// testdata/job.json against testdata/job-register.request.json).
func (s *Server) withDefaults(job *api.Job, js *jobState) *api.Job {
	str := func(p **string, v string) {
		if *p == nil {
			*p = &v
		}
	}
	str(&job.Name, *job.ID)
	str(&job.Region, "global")
	str(&job.NodePool, "default")
	str(&job.Status, "pending")
	for _, p := range []**string{&job.StatusDescription, &job.ParentID, &job.ConsulNamespace, &job.VaultNamespace, &job.NomadTokenID} {
		str(p, "")
	}
	if job.Priority == nil {
		job.Priority = ptr(50)
	}
	job.AllAtOnce = ptr(job.AllAtOnce != nil && *job.AllAtOnce)
	job.Stop, job.Stable = ptr(false), ptr(false)
	job.Version = ptr(js.version)
	job.SubmitTime = ptr(js.submitTime)
	job.CreateIndex, job.ModifyIndex, job.JobModifyIndex = ptr(js.createIndex), ptr(js.modifyIndex), ptr(js.jobModify)
	if job.Update == nil {
		var zero time.Duration
		job.Update = &api.UpdateStrategy{Stagger: &zero, MaxParallel: ptr(0), HealthCheck: ptr(""), MinHealthyTime: &zero,
			HealthyDeadline: &zero, ProgressDeadline: &zero, Canary: ptr(0), AutoRevert: ptr(false), AutoPromote: ptr(false)}
	}
	batch := *job.Type == "batch"
	for _, tg := range job.TaskGroups {
		if tg.Count == nil {
			tg.Count = ptr(1)
		}
		if tg.EphemeralDisk == nil {
			tg.EphemeralDisk = &api.EphemeralDisk{Migrate: ptr(false), SizeMB: ptr(300), Sticky: ptr(false)}
		}
		if tg.RestartPolicy == nil {
			if batch {
				tg.RestartPolicy = &api.RestartPolicy{Attempts: ptr(3), Delay: ptr(15 * time.Second), Interval: ptr(24 * time.Hour), Mode: ptr("fail")}
			} else {
				tg.RestartPolicy = &api.RestartPolicy{Attempts: ptr(2), Delay: ptr(15 * time.Second), Interval: ptr(30 * time.Minute), Mode: ptr("fail")}
			}
		}
		if tg.ReschedulePolicy == nil {
			if batch {
				tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: ptr(1), Delay: ptr(5 * time.Second), DelayFunction: ptr("constant"),
					Interval: ptr(24 * time.Hour), MaxDelay: ptr(time.Duration(0)), Unlimited: ptr(false)}
			} else {
				tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: ptr(0), Delay: ptr(30 * time.Second), DelayFunction: ptr("exponential"),
					Interval: ptr(time.Duration(0)), MaxDelay: ptr(time.Hour), Unlimited: ptr(true)}
			}
		}
		if tg.Consul == nil {
			tg.Consul = &api.Consul{Namespace: ""}
		}
		signals := false
		for _, t := range tg.Tasks {
			if t.KillSignal != "" {
				signals = true
			}
			if t.KillTimeout == nil {
				t.KillTimeout = ptr(5 * time.Second)
			}
			if t.LogConfig == nil {
				t.LogConfig = &api.LogConfig{Disabled: ptr(false), MaxFiles: ptr(10), MaxFileSizeMB: ptr(10)}
			}
			if t.RestartPolicy == nil {
				rp := *tg.RestartPolicy
				t.RestartPolicy = &rp
			}
			if t.Resources == nil {
				t.Resources = &api.Resources{}
			}
			r := t.Resources
			if r.CPU == nil {
				r.CPU = ptr(100)
			}
			if r.MemoryMB == nil {
				r.MemoryMB = ptr(300)
			}
			for _, p := range []**int{&r.Cores, &r.DiskMB, &r.IOPS, &r.MemoryMaxMB} {
				if *p == nil {
					*p = ptr(0)
				}
			}
		}
		if signals {
			tg.Constraints = append(tg.Constraints, &api.Constraint{LTarget: "${attr.os.signals}", Operand: "set_contains", RTarget: "SIGTERM"})
		}
	}
	return job
}

// scale applies a ScalingRequest to a job.
func (s *Server) scale(jobID, ns string, req *api.ScalingRequest) (map[string]any, *apiError) {
	group := req.Target["Group"]
	if group == "" {
		return nil, errf(http.StatusBadRequest, "missing task group name for scaling action")
	}
	if req.Count != nil && *req.Count < 0 {
		return nil, errf(http.StatusBadRequest, "scaling action count can't be negative")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobs[jobKey(ns, jobID)]
	if js == nil {
		return nil, errf(http.StatusNotFound, "job %q not found", jobID)
	}
	var tg *api.TaskGroup
	for _, g := range js.job.TaskGroups {
		if *g.Name == group {
			tg = g
		}
	}
	if tg == nil {
		return nil, errf(http.StatusBadRequest, "task group %q specified for scaling does not exist in job", group)
	}
	if d := js.deployment; d != nil && d.Status == "running" && req.Count != nil {
		return nil, errf(http.StatusBadRequest, "job scaling blocked due to active deployment")
	}
	prev := int64(intOr(tg.Count, 1))
	ev := api.ScalingEvent{Count: req.Count, PreviousCount: prev, Error: req.Error, Message: req.Message, Meta: req.Meta, Time: uint64(s.now())}
	if req.Count == nil {
		ev.CreateIndex = s.bump()
		js.events[group] = append([]api.ScalingEvent{ev}, js.events[group]...)
		return map[string]any{"EvalCreateIndex": 0, "EvalID": "", "Index": ev.CreateIndex, "JobModifyIndex": js.jobModify,
			"KnownLeader": true, "LastContact": 0, "NextToken": "", "Warnings": ""}, nil
	}
	// A new job version with the new count.
	job := cloneJob(js.job)
	for _, g := range job.TaskGroups {
		if *g.Name == group {
			g.Count = ptr(int(*req.Count))
		}
	}
	js.version++
	js.jobModify = s.bump()
	js.modifyIndex = js.jobModify
	job.Version, job.JobModifyIndex, job.ModifyIndex = ptr(js.version), ptr(js.jobModify), ptr(js.modifyIndex)
	job.SubmitTime = ptr(s.now())
	js.job = job
	e := s.newEval(js, "job-scaling")
	ev.EvalID = &e.ID
	ev.CreateIndex = s.bump()
	js.events[group] = append([]api.ScalingEvent{ev}, js.events[group]...)
	s.evaluate(jobKey(ns, jobID), e)
	return map[string]any{"EvalCreateIndex": e.CreateIndex, "EvalID": e.ID, "Index": ev.CreateIndex, "JobModifyIndex": js.jobModify,
		"KnownLeader": true, "LastContact": 0, "NextToken": "", "Warnings": ""}, nil
}

// stopAllocation stops one allocation; its job places a replacement under
// the same name index when the count is unchanged. As in Nomad, the
// request only marks the allocation for migration (DesiredTransition,
// an AllocationUpdateDesiredStatus event; it stays desired "run") and
// answers with a pending evaluation; the scheduler then stops it and
// places its replacement in one plan.
func (s *Server) stopAllocation(id string) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return nil, errf(http.StatusNotFound, "allocation not found")
	}
	ix := s.bump()
	key := jobKey(a.a.Namespace, a.a.JobID)
	js := s.jobs[key]
	if js == nil {
		return map[string]any{"EvalID": newID(), "Index": ix}, nil
	}
	e := s.newEval(js, "alloc-stop")
	if a.a.DesiredStatus != "run" || terminalClient(a.a.ClientStatus) {
		s.finishEval(e, js)
		return map[string]any{"EvalID": e.ID, "Index": ix}, nil
	}
	a.a.DesiredTransition = api.DesiredTransition{Migrate: ptr(true), NoShutdownDelay: ptr(false)}
	a.a.ModifyIndex, a.a.AllocModifyIndex, a.a.ModifyTime = ix, ix, s.now()
	a.transition = ix
	if s.cfg.Sync {
		s.bump()
	} else {
		e.Status = "pending"
	}
	s.after(s.placementDelay(), func() {
		if cur := s.jobs[key]; cur == js && a.a.DesiredStatus == "run" && !terminalClient(a.a.ClientStatus) {
			s.stopAlloc(a, "alloc is being migrated")
			if js.job.Stop == nil || !*js.job.Stop {
				s.replace(js, a, e.ID)
			}
		}
		s.finishEval(e, js)
		s.unblock()
	})
	return map[string]any{"EvalID": e.ID, "Index": ix}, nil
}

// replace places a migrated allocation's replacement under its name index.
// Callers hold mu.
func (s *Server) replace(js *jobState, a *allocState, evalID string) {
	if s.jobs[jobKey(a.a.Namespace, a.a.JobID)] != js || (js.job.Stop != nil && *js.job.Stop) || a.a.NextAllocation != "" {
		return
	}
	for _, tg := range js.job.TaskGroups {
		if *tg.Name != a.a.TaskGroup {
			continue
		}
		p := s.place(js.job, tg)
		if p.node == nil {
			js.queued[*tg.Name]++
			s.recordFailure(js, *tg.Name, p, evalID)
			break
		}
		n := s.newAlloc(js, tg, a.index, p, evalID)
		n.a.PreviousAllocation = a.a.ID
		a.a.NextAllocation = n.a.ID
	}
	s.updateJobStatus(js)
}

// deregister stops a job's allocations and, with purge, forgets the job.
func (s *Server) deregister(jobID, ns string, purge bool) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := jobKey(ns, jobID)
	js := s.jobs[key]
	if js == nil {
		return map[string]any{"EvalCreateIndex": 0, "EvalID": "", "Index": 0, "JobModifyIndex": 0,
			"KnownLeader": false, "LastContact": 0, "NextToken": "", "VolumeEvalID": "", "VolumeEvalIndex": 0}
	}
	ix := s.bump()
	js.jobModify = ix
	e := s.newEval(js, "job-deregister")
	for _, a := range s.allocs {
		// Nomad's reconciler (handleStop) drops terminal allocations
		// first: a finished one keeps desired "run".
		if a.a.JobID == jobID && a.a.Namespace == ns && a.a.DesiredStatus == "run" && !terminalClient(a.a.ClientStatus) {
			s.stopAlloc(a, "alloc not needed due to job update")
		}
	}
	if js.blockedEval != "" {
		if b := s.evals[js.blockedEval]; b != nil {
			b.Status = "cancelled"
		}
	}
	if purge {
		delete(s.jobs, key)
	} else {
		// Stopping is a job update: a new version, Stop set.
		j := cloneJob(js.job)
		j.Stop = ptr(true)
		js.version++
		js.modifyIndex = ix
		j.Version, j.JobModifyIndex, j.ModifyIndex = ptr(js.version), ptr(ix), ptr(ix)
		js.job = j
		js.queued = map[string]int{}
		s.updateJobStatus(js)
	}
	s.unblock()
	return map[string]any{"EvalCreateIndex": ix, "EvalID": e.ID, "Index": ix, "JobModifyIndex": ix,
		"KnownLeader": false, "LastContact": 0, "NextToken": "", "VolumeEvalID": "", "VolumeEvalIndex": 0}
}
