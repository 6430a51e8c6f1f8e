package nomadtest

import (
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/nomad/api"
)

// jobState is a registered job and what the scheduler knows about it.
type jobState struct {
	job         *api.Job // as stored: server defaults filled in
	version     uint64
	createIndex uint64
	modifyIndex uint64
	jobModify   uint64
	submitTime  int64
	events      map[string][]api.ScalingEvent // per group, newest first
	queued      map[string]int
	blockedEval string
	deployment  *api.Deployment
	// tried is the capacity generation (Server.freed) of the last
	// placement attempt; retrying says a blocked retry is scheduled.
	tried    uint64
	retrying bool
}

// allocState is one allocation.
type allocState struct {
	a       *api.Allocation
	index   int
	version uint64 // JobVersion: the job version it runs
	// restarts are the task's restarts in the policy's interval; signals
	// what it was sent.
	restarts []time.Time
	signals  []string
	// transition is the index at which an allocation stop set its
	// DesiredTransition (an AllocationUpdateDesiredStatus event).
	transition uint64
}

func terminalClient(status string) bool {
	return status == "complete" || status == "failed" || status == "lost"
}

// terminal is Nomad's Allocation.TerminalStatus: desired stop/evict or a
// terminal client status. Such allocations hold no resources for placement.
func (a *allocState) terminal() bool {
	return a.a.DesiredStatus == "stop" || a.a.DesiredStatus == "evict" || terminalClient(a.a.ClientStatus)
}

// usageOn sums what non-terminal allocations hold on a node. Callers hold mu.
func (s *Server) usageOn(n *node) usage {
	u := usage{devices: map[string]bool{}}
	for _, a := range s.allocs {
		if a.a.NodeID != n.id || a.terminal() {
			continue
		}
		for _, tr := range a.a.AllocatedResources.Tasks {
			u.cpu += tr.Cpu.CpuShares
			u.mem += tr.Memory.MemoryMB
			for _, d := range tr.Devices {
				for _, id := range d.DeviceIDs {
					u.devices[id] = true
				}
			}
		}
	}
	return u
}

// placement is the outcome of trying one allocation on the cluster.
type placement struct {
	node      *node
	resources map[string]*api.AllocatedTaskResources
	// why counts the reasons nodes were rejected (FailedTGAllocs).
	filtered  map[string]int
	exhausted map[string]int
	evaluated int
	nFiltered int // nodes filtered (constraints), not exhausted
}

// place finds the first node that fits every task of the group. Callers
// hold mu.
func (s *Server) place(job *api.Job, tg *api.TaskGroup) placement {
	p := placement{filtered: map[string]int{}, exhausted: map[string]int{}}
	for _, n := range s.nodes {
		if !n.eligible() || !contains(job.Datacenters, n.spec.Datacenter) {
			continue
		}
		p.evaluated++
		u := s.usageOn(n)
		res := map[string]*api.AllocatedTaskResources{}
		fits := true
		for _, t := range tg.Tasks {
			if !n.hasDriver(t.Driver) {
				p.filtered["missing drivers"]++
				p.nFiltered++
				fits = false
				break
			}
			r := t.Resources
			cpu, mem := int64(intOr(r.CPU, 100)), int64(intOr(r.MemoryMB, 300))
			if u.cpu+cpu > n.spec.CPUShares {
				p.exhausted["cpu"]++
				fits = false
				break
			}
			if u.mem+mem > n.spec.MemoryMB {
				p.exhausted["memory"]++
				fits = false
				break
			}
			tr := &api.AllocatedTaskResources{
				Cpu:    api.AllocatedCpuResources{CpuShares: cpu},
				Memory: api.AllocatedMemoryResources{MemoryMB: mem},
			}
			for _, req := range r.Devices {
				d, miss := pickDevices(n, req, u)
				if d == nil {
					// Nomad's two texts: the feasibility checker filters a
					// node without a matching device group (too few healthy
					// instances, a failed constraint); the bin packer finds
					// a matching group exhausted.
					if miss == missFiltered {
						p.filtered["missing devices"]++
						p.nFiltered++
					} else {
						p.exhausted["devices: no devices match request"]++
					}
					fits = false
					break
				}
				for _, id := range d.DeviceIDs {
					u.devices[id] = true
				}
				tr.Devices = append(tr.Devices, d)
			}
			if !fits {
				break
			}
			u.cpu += cpu
			u.mem += mem
			res[t.Name] = tr
		}
		if fits {
			p.node, p.resources = n, res
			return p
		}
	}
	return p
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func intOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

// newAlloc builds a placed allocation. Callers hold mu.
func (s *Server) newAlloc(js *jobState, tg *api.TaskGroup, idx int, p placement, evalID string) *allocState {
	now := s.now()
	ix := s.index
	a := &api.Allocation{
		ID:                 newID(),
		Namespace:          *js.job.Namespace,
		EvalID:             evalID,
		Name:               fmt.Sprintf("%s.%s[%d]", *js.job.ID, *tg.Name, idx),
		NodeID:             p.node.id,
		NodeName:           p.node.spec.Name,
		JobID:              *js.job.ID,
		Job:                js.job,
		TaskGroup:          *tg.Name,
		AllocatedResources: &api.AllocatedResources{Tasks: p.resources, Shared: api.AllocatedSharedResources{DiskMB: 300}},
		DesiredStatus:      "run",
		ClientStatus:       "pending",
		TaskStates:         map[string]*api.TaskState{},
		CreateIndex:        ix,
		ModifyIndex:        ix,
		AllocModifyIndex:   ix,
		CreateTime:         now,
		ModifyTime:         now,
		Metrics: &api.AllocationMetric{
			NodesEvaluated: p.evaluated, NodesInPool: len(s.nodes),
			NodesAvailable: map[string]int{p.node.spec.Datacenter: 1},
		},
	}
	for _, t := range tg.Tasks {
		a.TaskStates[t.Name] = &api.TaskState{State: "pending", Events: []*api.TaskEvent{
			{Type: api.TaskReceived, Time: now, DisplayMessage: "Task received by client", Details: map[string]string{}},
		}}
	}
	st := &allocState{a: a, index: idx, version: js.version}
	s.allocs[a.ID] = st
	if !s.cfg.ManualClient {
		s.after(s.cfg.StartDelay, func() {
			if st.a.ClientStatus == "pending" && st.a.DesiredStatus == "run" {
				s.setRunning(st)
				s.updateJobStatusOf(st)
			}
		})
	}
	return st
}

// reconcile makes a job's allocations match its groups' counts, the way
// Nomad's batch reconciler does for the cases edl meets. It returns the
// number of allocations left queued. Callers hold mu and have bumped the
// index for the triggering write.
func (s *Server) reconcile(js *jobState, evalID string) int {
	js.tried = s.freed
	queuedTotal := 0
	if js.job.Stop != nil && *js.job.Stop {
		return 0
	}
	for _, tg := range js.job.TaskGroups {
		name := *tg.Name
		count := intOr(tg.Count, 1)
		mine := s.sortedAllocs(func(a *allocState) bool {
			return a.a.JobID == *js.job.ID && a.a.Namespace == *js.job.Namespace && a.a.TaskGroup == name
		})
		// Allocations that hold a name slot: live ones, and finished ones of
		// the current version that Nomad will not replace.
		var live []*allocState
		used := map[int]bool{}
		for _, a := range mine {
			switch {
			case a.a.DesiredStatus != "run":
			case !terminalClient(a.a.ClientStatus):
				live = append(live, a)
				used[a.index] = true
			case a.version == js.version && a.a.NextAllocation == "":
				used[a.index] = true
			}
		}
		// Scale-in: stop the highest name indexes. A stopped allocation
		// keeps its job version and evaluation (recorded).
		excess := len(used) - count
		sort.Slice(live, func(i, j int) bool { return live[i].index > live[j].index })
		kept := live[:0:0]
		for _, a := range live {
			if excess > 0 {
				s.stopAlloc(a, "alloc not needed due to job update")
				delete(used, a.index)
				excess--
				continue
			}
			kept = append(kept, a)
		}
		// The others are updated in place to the current version, by this
		// evaluation (recorded: JobVersion, EvalID, AllocModifyIndex).
		for _, a := range kept {
			if a.version != js.version {
				a.version = js.version
				a.a.Job = js.job
				a.a.ModifyIndex, a.a.AllocModifyIndex = s.index, s.index
				if evalID != "" {
					a.a.EvalID = evalID
				}
			}
		}
		// Scale-out: fill the lowest free name indexes.
		missing := count - len(used)
		queued := 0
		for idx := 0; missing > 0; idx++ {
			if used[idx] {
				continue
			}
			p := s.place(js.job, tg)
			if p.node == nil {
				queued = missing
				s.recordFailure(js, name, p, evalID)
				break
			}
			s.newAlloc(js, tg, idx, p, evalID)
			used[idx] = true
			missing--
		}
		js.queued[name] = queued
		queuedTotal += queued
	}
	if queuedTotal == 0 && js.blockedEval != "" {
		if e := s.evals[js.blockedEval]; e != nil {
			e.Status, e.ModifyIndex, e.ModifyTime = "complete", s.index, s.now()
		}
		js.blockedEval = ""
	}
	s.updateJobStatus(js)
	return queuedTotal
}

// stopAlloc marks an allocation for stopping. As in Nomad's plans, it
// keeps its EvalID and job version. Callers hold mu.
func (s *Server) stopAlloc(a *allocState, why string) {
	s.freed++
	a.a.DesiredStatus = "stop"
	a.a.DesiredDescription = why
	a.a.ModifyIndex, a.a.AllocModifyIndex = s.index, s.index
	a.a.ModifyTime = s.now()
	if !s.cfg.ManualClient && !terminalClient(a.a.ClientStatus) {
		// The task got kill_signal; it stays client-running until it exits
		// (its devices are already free for placement: terminal()).
		s.after(min(s.cfg.ExitDelay, s.killTimeout(a)), func() {
			if !terminalClient(a.a.ClientStatus) {
				s.setFinished(a, "complete", 0, true)
				s.updateJobStatusOf(a)
			}
		})
	}
}

// updateJobStatusOf refreshes the status of an allocation's job. Callers
// hold mu.
func (s *Server) updateJobStatusOf(a *allocState) {
	if js := s.jobs[jobKey(a.a.Namespace, a.a.JobID)]; js != nil {
		s.updateJobStatus(js)
	}
}

// unblock retries placement for every job with queued allocations, as
// Nomad's blocked evaluations do when capacity frees. Callers hold mu.
func (s *Server) unblock() {
	keys := make([]string, 0, len(s.jobs))
	for k := range s.jobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		js := s.jobs[k]
		total := 0
		for _, q := range js.queued {
			total += q
		}
		if total == 0 {
			continue
		}
		if s.cfg.Sync {
			s.reconcile(js, js.blockedEval)
			continue
		}
		// Asynchronous: the blocked evaluation is re-queued and placed by a
		// new scheduler pass PlacementDelay later, once per capacity
		// change since its last try.
		if js.retrying || js.tried >= s.freed {
			continue
		}
		js.retrying = true
		s.after(s.placementDelay(), func() {
			js.retrying = false
			if s.jobs[k] == js {
				s.reconcile(js, js.blockedEval)
			}
		})
	}
}

// updateJobStatus sets pending/running/dead from the allocations. Callers
// hold mu.
func (s *Server) updateJobStatus(js *jobState) {
	status := "dead"
	for _, a := range s.allocs {
		if a.a.JobID == *js.job.ID && a.a.Namespace == *js.job.Namespace && !terminalClient(a.a.ClientStatus) {
			status = "running"
			break
		}
	}
	if status == "dead" {
		for _, q := range js.queued {
			if q > 0 {
				status = "pending"
			}
		}
	}
	if js.job.Status == nil || *js.job.Status != status {
		// A copy, so allocations keep the job as it was when placed.
		j := *js.job
		j.Status = &status
		mi := s.index
		j.ModifyIndex = &mi
		js.modifyIndex = mi
		js.job = &j
	}
}
