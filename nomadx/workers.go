package nomadx

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/jobs"
	"github.com/hashicorp/nomad/api"
)

// workerState maps an allocation's desired and client status:
//
//	client pending  + desired run -> pending
//	client running  + desired run -> running   (unknown: client lost contact, still holds its GPUs)
//	client pending/running/unknown + desired stop/evict -> stopping
//	client complete -> complete;  failed, lost -> failed
func workerState(desired, client string) jobs.WorkerState {
	switch client {
	case "complete":
		return jobs.WorkerComplete
	case "failed", "lost":
		return jobs.WorkerFailed
	}
	if desired != "run" {
		return jobs.WorkerStopping
	}
	if client == "pending" {
		return jobs.WorkerPending
	}
	return jobs.WorkerRunning
}

// nameIndex parses the N of "job.workers[N]"; -1 when absent.
func nameIndex(name string) int {
	i := strings.LastIndex(name, "[")
	if i < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	n, err := strconv.Atoi(name[i+1 : len(name)-1])
	if err != nil {
		return -1
	}
	return n
}

// gpuIDs lists the nvidia/gpu instances an allocation holds.
func gpuIDs(ar *api.AllocatedResources) []string {
	if ar == nil {
		return nil
	}
	var ids []string
	for _, t := range ar.Tasks {
		for _, d := range t.Devices {
			if d.Vendor == "nvidia" && d.Type == "gpu" {
				ids = append(ids, d.DeviceIDs...)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// Workers lists the job's workers: its allocations, live and finished, by
// name index, and one pending worker (Queued) per slot of the group's count
// that no allocation holds yet: placement is asynchronous (allocations
// appear tens of milliseconds after a register or scale answers) and an
// unplaceable one waits in a blocked evaluation, so without them the
// planner would see fewer workers than it asked for and flap. A stopping
// allocation (desired stop, still client-running until its task exits) is
// WorkerStopping: Nomad already counts its devices as free.
//
// Right after Capacity, Workers answers from Capacity's cluster-wide read
// (no request; each job once); otherwise it reads the job's allocations
// (one request; GPU IDs come from the last cluster-wide read, or one read
// per allocation placed since, as list stubs of one job do not carry them)
// and, unless known, the job (one more).
func (c *Cluster) Workers(ctx context.Context, jobID string) ([]jobs.Worker, error) {
	id := c.cfg.NomadJobID(jobID)
	if v := c.fresh(id); v != nil {
		c.cache.mu.Lock()
		served := v.served[jobID]
		v.served[jobID] = true
		c.cache.mu.Unlock()
		if !served {
			var mine []*api.AllocationListStub
			for _, a := range v.allocs {
				if a.JobID == id && a.Namespace == c.ns() {
					mine = append(mine, a)
				}
			}
			var in *jobInfo
			if stub := v.jobs[id]; stub != nil {
				got, found, err := c.readInfo(ctx, jobID, id, stub)
				if err != nil {
					return nil, err
				}
				if found {
					in = &got
				}
			}
			return workersOf(jobID, mine, in, nodeDrains(v.nodes), nil), nil
		}
	}
	var out []jobs.Worker
	err := c.do(ctx, "read", id, func(ctx context.Context) error {
		allocs, _, err := c.client.Jobs().Allocations(id, false, c.q(ctx))
		if err != nil {
			return err
		}
		in, found, err := c.infoOf(ctx, jobID, id, nil)
		if err != nil {
			return err
		}
		var inp *jobInfo
		if found {
			inp = &in
		}
		var drains map[string]bool
		gpus := map[string][]string{}
		c.cache.mu.Lock()
		if v := c.cache.v; v != nil {
			drains = nodeDrains(v.nodes)
			for _, a := range v.allocs {
				if a.JobID == id {
					gpus[a.ID] = gpuIDs(a.AllocatedResources)
				}
			}
		}
		c.cache.mu.Unlock()
		// Allocations the last cluster-wide read did not have (placed
		// since): their device IDs need one read each.
		for _, a := range allocs {
			if _, ok := gpus[a.ID]; ok || a.TaskGroup != GroupName || !workerState(a.DesiredStatus, a.ClientStatus).Live() {
				continue
			}
			full, _, err := c.client.Allocations().Info(a.ID, c.q(ctx))
			if err != nil && !notFound(err) {
				return err
			}
			if full != nil {
				gpus[a.ID] = gpuIDs(full.AllocatedResources)
			}
		}
		out = workersOf(jobID, allocs, inp, drains, gpus)
		return nil
	})
	return out, err
}

// readInfo is infoOf inside the retry loop.
func (c *Cluster) readInfo(ctx context.Context, jobID, id string, stub *api.JobListStub) (jobInfo, bool, error) {
	var in jobInfo
	var found bool
	err := c.do(ctx, "read", id, func(ctx context.Context) error {
		var err error
		in, found, err = c.infoOf(ctx, jobID, id, stub)
		return err
	})
	return in, found, err
}

// workersOf is the pure part of Workers. in is the group's count and
// version (nil: job unknown or purged); gpus, when not nil, supplies device
// IDs the stubs lack. Slots of the count no allocation holds are queued
// (blocked evaluation) or not yet evaluated: either way pending workers.
func workersOf(jobID string, allocs []*api.AllocationListStub, in *jobInfo, drains map[string]bool, gpus map[string][]string) []jobs.Worker {
	out := []jobs.Worker{}
	held := map[int]bool{}
	for _, a := range allocs {
		if a.TaskGroup != GroupName {
			continue
		}
		w := jobs.Worker{ID: a.ID, JobID: jobID, Index: nameIndex(a.Name), Node: a.NodeID,
			State:         workerState(a.DesiredStatus, a.ClientStatus),
			DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus, Draining: drains[a.NodeID]}
		if w.State.Live() {
			if a.AllocatedResources != nil {
				w.GPUs = gpuIDs(a.AllocatedResources)
			} else if gpus != nil {
				w.GPUs = gpus[a.ID]
			}
		}
		out = append(out, w)
		// The name slots of the group's count this allocation holds: a
		// live one, or (batch) a finished one of the current version that
		// Nomad does not replace.
		if in != nil && a.DesiredStatus == "run" && (w.State.Live() || a.JobVersion == in.version && a.NextAllocation == "") {
			held[w.Index] = true
		}
	}
	if in != nil && !in.stopped {
		missing := in.count - len(held)
		for idx := 0; missing > 0; idx++ {
			if held[idx] {
				continue
			}
			out = append(out, jobs.Worker{ID: "queued-" + strconv.Itoa(idx), JobID: jobID, Index: idx,
				State: jobs.WorkerPending, Queued: true})
			missing--
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}
