package nomadtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// wire turns an api struct into the generic JSON value Nomad would send:
// maps encode with sorted keys, as Nomad's encoder does, and large
// integers keep their precision.
func wire(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		panic(err)
	}
	return out
}

// taskStatesWire writes null for zero timestamps in task states, as
// Nomad's *time.Time fields do, and aligns the events with Nomad 1.6.1.
func taskStatesWire(states any) {
	m, _ := states.(map[string]any)
	for _, ts := range m {
		t, _ := ts.(map[string]any)
		for _, k := range []string{"LastRestart", "StartedAt", "FinishedAt"} {
			if t[k] == "0001-01-01T00:00:00Z" {
				t[k] = nil
			}
		}
		t["TaskHandle"] = nil
		for _, e := range list(t["Events"]) {
			del(e, "DiskSize")
		}
	}
}

// metricWire drops what Nomad 1.6.1 does not send in an AllocationMetric.
func metricWire(m map[string]any) {
	del(m, "NodePool")
}

// jobWire is a stored job as Nomad 1.6.1 sends it: the api struct (from a
// newer client) less the fields that version lacks, plus the ones the api
// struct does not carry.
func jobWire(j *api.Job) map[string]any {
	m := wire(j).(map[string]any)
	del(m, "Submission", "UI", "VersionTag", "Migrate", "Reschedule")
	m["ConsulToken"], m["VaultToken"] = "", ""
	if m["DispatchIdempotencyToken"] == nil {
		m["DispatchIdempotencyToken"] = ""
	}
	for _, g := range list(m["TaskGroups"]) {
		del(g, "Disconnect", "MaxRunDuration", "PreventRescheduleOnLost")
		del(obj(g["Consul"]), "Cluster", "Partition")
		del(obj(g["RestartPolicy"]), "RenderTemplates")
		for _, t := range list(g["Tasks"]) {
			del(t, "Actions", "Consul", "Identities", "Schedule", "Secrets")
			t["CSIPluginConfig"] = nil
			del(obj(t["LogConfig"]), "Enabled")
			del(obj(t["Resources"]), "NUMA", "SecretsMB")
			del(obj(t["RestartPolicy"]), "RenderTemplates")
		}
	}
	return m
}

func del(m map[string]any, keys ...string) {
	for _, k := range keys {
		delete(m, k)
	}
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func list(v any) []map[string]any {
	var out []map[string]any
	l, _ := v.([]any)
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func (s *Server) jobView(id, ns string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobs[jobKey(ns, id)]
	if js == nil {
		return nil, errf(http.StatusNotFound, "job not found")
	}
	return jobWire(js.job), nil
}

func stubWire(as *allocState, resources bool) map[string]any {
	a := as.a
	st := api.AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace, NodeID: a.NodeID, NodeName: a.NodeName,
		JobID: a.JobID, JobType: *a.Job.Type, JobVersion: as.version, TaskGroup: a.TaskGroup,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription, TaskStates: a.TaskStates,
		DeploymentStatus: a.DeploymentStatus, FollowupEvalID: a.FollowupEvalID, NextAllocation: a.NextAllocation,
		RescheduleTracker: a.RescheduleTracker, PreemptedAllocations: a.PreemptedAllocations,
		PreemptedByAllocation: a.PreemptedByAllocation, CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex,
		CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
	if resources {
		st.AllocatedResources = a.AllocatedResources
	}
	m := wire(st).(map[string]any)
	m["DesiredTransition"] = wire(a.DesiredTransition)
	del(obj(m["DesiredTransition"]), "MigrateDisablePlacement")
	taskStatesWire(m["TaskStates"])
	return m
}

// allocStubs lists allocations in Nomad's order: by ID (its state store's
// indexes end in the ID), so a replacement may come before or after the
// allocation it replaces. Callers hold mu.
func (s *Server) allocStubs(keep func(*allocState) bool, resources bool) []any {
	all := s.sortedAllocs(keep)
	sort.Slice(all, func(i, j int) bool { return all[i].a.ID < all[j].a.ID })
	out := []any{}
	for _, a := range all {
		out = append(out, stubWire(a, resources))
	}
	return out
}

func (s *Server) allocList(ns string, resources bool) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allocStubs(func(a *allocState) bool { return ns == "*" || a.a.Namespace == ns }, resources)
}

func (s *Server) jobSub(id, sub, ns string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	js := s.jobs[jobKey(ns, id)]
	switch sub {
	case "allocations":
		// Allocations outlive a purged job until garbage collection.
		return s.allocStubs(func(a *allocState) bool { return a.a.JobID == id && a.a.Namespace == ns }, false), nil
	case "evaluations":
		var evs []*api.Evaluation
		for _, e := range s.evals {
			if e.JobID == id && e.Namespace == ns {
				evs = append(evs, e)
			}
		}
		sort.Slice(evs, func(i, j int) bool { return evs[i].ID < evs[j].ID })
		out := []any{}
		for _, e := range evs {
			out = append(out, evalWire(e))
		}
		return out, nil
	case "deployments":
		if js == nil || js.deployment == nil {
			return []any{}, nil
		}
		return []any{wire(js.deployment)}, nil
	case "deployment":
		if js == nil || js.deployment == nil {
			return nil, nil
		}
		return wire(js.deployment), nil
	}
	if js == nil {
		e := errf(http.StatusNotFound, "job not found")
		e.unindexed = sub == "scale"
		return nil, e
	}
	switch sub {
	case "summary":
		return s.summary(js), nil
	case "scale":
		return s.scaleStatus(js), nil
	}
	return nil, errf(http.StatusNotFound, "Invalid URL")
}

// evalWire drops the api fields Nomad leaves out when empty.
func evalWire(e *api.Evaluation) map[string]any {
	m := wire(e).(map[string]any)
	for k, v := range m {
		switch x := v.(type) {
		case string:
			if x == "" && k != "Status" {
				delete(m, k)
			}
		case nil:
			delete(m, k)
		case json.Number:
			if x == "0" && k != "CreateIndex" && k != "ModifyIndex" && k != "JobModifyIndex" && k != "Priority" && k != "SnapshotIndex" {
				delete(m, k)
			}
		case bool:
			if !x {
				delete(m, k)
			}
		case []any:
			if len(x) == 0 {
				delete(m, k)
			}
		}
	}
	if wt, ok := m["WaitUntil"]; ok && wt == "0001-01-01T00:00:00Z" {
		delete(m, "WaitUntil")
	}
	for _, f := range obj(m["FailedTGAllocs"]) {
		metricWire(obj(f))
		for _, r := range obj(obj(f)["ResourcesExhausted"]) {
			del(obj(r), "NUMA", "SecretsMB")
		}
	}
	return m
}

// jobList is GET /v1/jobs: the jobs of a namespace ("*": all) whose ID
// starts with prefix, by ID, with their summaries; meta adds Meta.
func (s *Server) jobList(ns, prefix string, meta bool) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.jobs))
	for k, js := range s.jobs {
		if (ns == "*" || *js.job.Namespace == ns) && strings.HasPrefix(*js.job.ID, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := []any{}
	for _, k := range keys {
		js := s.jobs[k]
		j := js.job
		sum := s.summaryOf(js)
		st := api.JobListStub{
			ID: *j.ID, ParentID: deref0(j.ParentID), Name: deref0(j.Name), Namespace: *j.Namespace, Datacenters: j.Datacenters,
			Type: *j.Type, Priority: intOr(j.Priority, 50), Stop: j.Stop != nil && *j.Stop, Status: deref0(j.Status),
			StatusDescription: deref0(j.StatusDescription), JobSummary: &sum,
			CreateIndex: js.createIndex, ModifyIndex: js.modifyIndex, JobModifyIndex: js.jobModify, SubmitTime: js.submitTime,
		}
		if meta {
			st.Meta = j.Meta
		}
		out = append(out, wire(st))
	}
	return out
}

func deref0[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// summary counts allocations per group by client status.
func (s *Server) summary(js *jobState) map[string]any {
	return wire(s.summaryOf(js)).(map[string]any)
}

// summaryOf is the job summary. Callers hold mu.
func (s *Server) summaryOf(js *jobState) api.JobSummary {
	sum := map[string]*api.TaskGroupSummary{}
	for _, tg := range js.job.TaskGroups {
		sum[*tg.Name] = &api.TaskGroupSummary{Queued: js.queued[*tg.Name]}
	}
	for _, a := range s.allocs {
		g := sum[a.a.TaskGroup]
		if a.a.JobID != *js.job.ID || a.a.Namespace != *js.job.Namespace || g == nil {
			continue
		}
		switch a.a.ClientStatus {
		case "pending":
			g.Starting++
		case "running":
			g.Running++
		case "complete":
			g.Complete++
		case "failed":
			g.Failed++
		case "lost":
			g.Lost++
		case "unknown":
			g.Unknown++
		}
	}
	return api.JobSummary{
		JobID: *js.job.ID, Namespace: *js.job.Namespace, Summary: deref(sum),
		Children: &api.JobChildrenSummary{}, CreateIndex: js.createIndex, ModifyIndex: s.index,
	}
}

func deref(m map[string]*api.TaskGroupSummary) map[string]api.TaskGroupSummary {
	out := map[string]api.TaskGroupSummary{}
	for k, v := range m {
		out[k] = *v
	}
	return out
}

func (s *Server) scaleStatus(js *jobState) map[string]any {
	st := api.JobScaleStatusResponse{
		JobID: *js.job.ID, Namespace: *js.job.Namespace, JobCreateIndex: js.createIndex,
		JobModifyIndex: js.jobModify, JobStopped: js.job.Stop != nil && *js.job.Stop,
		TaskGroups: map[string]api.TaskGroupScaleStatus{},
	}
	for _, tg := range js.job.TaskGroups {
		g := api.TaskGroupScaleStatus{Desired: intOr(tg.Count, 1), Events: js.events[*tg.Name]}
		for _, a := range s.allocs {
			if a.a.JobID != *js.job.ID || a.a.Namespace != *js.job.Namespace || a.a.TaskGroup != *tg.Name || a.a.DesiredStatus != "run" {
				continue
			}
			if !terminalClient(a.a.ClientStatus) {
				g.Placed++
			}
			if a.a.ClientStatus == "running" {
				g.Running++
			}
		}
		st.TaskGroups[*tg.Name] = g
	}
	return wire(st).(map[string]any)
}

func (s *Server) allocView(id string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return nil, errf(http.StatusNotFound, "alloc not found")
	}
	return s.allocWire(a), nil
}

// allocWire is GET /v1/allocation/:id's body. Callers hold mu.
func (s *Server) allocWire(a *allocState) map[string]any {
	m := wire(a.a).(map[string]any)
	m["Job"] = jobWire(a.a.Job)
	metricWire(obj(m["Metrics"]))
	dt := obj(m["DesiredTransition"])
	del(dt, "MigrateDisablePlacement")
	if dt["Migrate"] == nil && dt["Reschedule"] == nil && dt["ForceReschedule"] == nil && dt["NoShutdownDelay"] == nil {
		delete(m, "DesiredTransition")
	}
	if m["DesiredDescription"] == "" {
		delete(m, "DesiredDescription")
	}
	m["NetworkStatus"] = map[string]any{"Address": "", "DNS": nil, "InterfaceName": ""}
	legacyResources(m, a.a)
	taskStatesWire(m["TaskStates"])
	for _, k := range []string{"DeploymentID", "DeploymentStatus", "FollowupEvalID", "PreviousAllocation", "NextAllocation",
		"PreemptedAllocations", "PreemptedByAllocation", "RescheduleTracker", "Services"} {
		if v, ok := m[k]; ok && (v == nil || v == "") {
			delete(m, k)
		}
	}
	return m
}

func (s *Server) nodeStub(n *node, resources bool) api.NodeListStub {
	st := api.NodeListStub{
		Address: "127.0.0.1", ID: n.id, Datacenter: n.spec.Datacenter, Name: n.spec.Name, NodePool: "default",
		Version: "1.6.1", Drain: n.spec.Drain, SchedulingEligibility: "eligible", Status: "ready",
		Drivers: map[string]*api.DriverInfo{}, CreateIndex: n.createIndex, ModifyIndex: n.modifyIndex,
		LastDrain: n.lastDrain,
	}
	if n.spec.Ineligible || n.spec.Drain {
		st.SchedulingEligibility = "ineligible"
	}
	if n.spec.Down {
		st.Status = "down"
	}
	for _, d := range n.spec.Drivers {
		st.Drivers[d] = &api.DriverInfo{Attributes: map[string]string{"driver." + d: "true"}, Detected: true, Healthy: true, HealthDescription: "Healthy"}
	}
	if resources {
		st.NodeResources = &api.NodeResources{
			Cpu:    nodeCPU(n.spec.CPUShares),
			Memory: api.NodeMemoryResources{MemoryMB: n.spec.MemoryMB},
			Disk:   api.NodeDiskResources{DiskMB: 72071}, Devices: n.devices,
			MinDynamicPort: 20000, MaxDynamicPort: 32000,
		}
		st.ReservedResources = &api.NodeReservedResources{}
	}
	return st
}

func (s *Server) nodeList(resources bool) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []any{}
	for _, n := range s.nodes {
		m := wire(s.nodeStub(n, resources)).(map[string]any)
		nodeWire(m)
		out = append(out, m)
	}
	return out
}

func (s *Server) nodeView(id string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if n.id != id {
			continue
		}
		st := s.nodeStub(n, true)
		node := api.Node{
			ID: st.ID, Name: st.Name, Datacenter: st.Datacenter, NodePool: st.NodePool, HTTPAddr: "127.0.0.1:4646",
			Drain: st.Drain, SchedulingEligibility: st.SchedulingEligibility, Status: st.Status,
			Drivers: st.Drivers, NodeResources: st.NodeResources, ReservedResources: st.ReservedResources,
			Attributes:  map[string]string{"unique.hostname": n.spec.Name, "nomad.version": "1.6.1", "os.signals": "SIGTERM,SIGKILL,SIGINT"},
			CreateIndex: st.CreateIndex, ModifyIndex: st.ModifyIndex, LastDrain: st.LastDrain,
		}
		if n.drain != nil {
			node.DrainStrategy = n.drain.strategy
		}
		m := wire(node).(map[string]any)
		nodeWire(m)
		del(m, "GCVolumesOnNodeGC")
		m["SecretID"] = ""
		// What a 1.6.1 agent always sends (recorded node.json): the
		// default connect meta, the registration event, empty plugin and
		// link maps, and the legacy Resources/Reserved.
		m["Meta"] = map[string]any{"connect.gateway_image": "docker.io/envoyproxy/envoy:v${NOMAD_envoy_version}",
			"connect.log_level": "info", "connect.proxy_concurrency": "1",
			"connect.sidecar_image": "docker.io/envoyproxy/envoy:v${NOMAD_envoy_version}"}
		m["Events"] = []any{map[string]any{"CreateIndex": 0, "Details": nil, "Message": "Node registered",
			"Subsystem": "Cluster", "Timestamp": time.Unix(0, s.now()).UTC().Format(time.RFC3339)}}
		m["Links"], m["CSIControllerPlugins"], m["CSINodePlugins"] = map[string]any{}, map[string]any{}, map[string]any{}
		legacy := func(cpu, mem, disk int64) map[string]any {
			return map[string]any{"CPU": cpu, "Cores": 0, "Devices": nil, "DiskMB": disk, "IOPS": 0,
				"MemoryMB": mem, "MemoryMaxMB": 0, "Networks": nil}
		}
		m["Reserved"] = legacy(0, 0, 0)
		m["Resources"] = legacy(n.spec.CPUShares, n.spec.MemoryMB, 72071)
		return m, nil
	}
	return nil, errf(http.StatusNotFound, "node not found")
}

// nodeCPU is a node's CPU as the agent fingerprints it: shares and whole
// cores (the recorded agent: 5192 MHz, 2 cores, both reservable).
func nodeCPU(shares int64) api.NodeCpuResources {
	cores := max(1, int(shares/2596))
	c := api.NodeCpuResources{CpuShares: shares, TotalCpuCores: uint16(cores)}
	for i := range cores {
		c.ReservableCpuCores = append(c.ReservableCpuCores, uint16(i))
	}
	return c
}

// nodeWire adds the node fields Nomad 1.6.1 sends that the api struct
// lacks.
func nodeWire(m map[string]any) {
	if _, ok := m["HostVolumes"]; !ok {
		m["HostVolumes"] = nil
	}
	if cpu := obj(obj(m["ReservedResources"])["Cpu"]); cpu != nil {
		cpu["ReservedCpuCores"] = nil
	}
}

// legacyResources adds the deprecated Resources, SharedResources,
// TaskResources and AllocatedResources.TaskLifecycles that Nomad 1.6.1
// still sends with an allocation.
func legacyResources(m map[string]any, a *api.Allocation) {
	res := func(cpu, mem, disk int64) map[string]any {
		return map[string]any{"CPU": cpu, "Cores": 0, "Devices": nil, "DiskMB": disk, "IOPS": 0,
			"MemoryMB": mem, "MemoryMaxMB": 0, "Networks": nil}
	}
	var cpu, mem int64
	tasks := map[string]any{}
	life := map[string]any{}
	for name, t := range a.AllocatedResources.Tasks {
		cpu += t.Cpu.CpuShares
		mem += t.Memory.MemoryMB
		tasks[name] = res(t.Cpu.CpuShares, t.Memory.MemoryMB, 0)
		life[name] = nil
	}
	disk := a.AllocatedResources.Shared.DiskMB
	total := res(cpu, mem, disk)
	total["MemoryMaxMB"] = mem
	m["Resources"] = total
	m["SharedResources"] = res(0, 0, disk)
	m["TaskResources"] = tasks
	obj(m["AllocatedResources"])["TaskLifecycles"] = life
}
