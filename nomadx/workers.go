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

// Workers lists the job's allocations, live and finished, by name index.
// GPU IDs are read per live allocation (list stubs do not carry them).
func (c *Cluster) Workers(ctx context.Context, jobID string) ([]jobs.Worker, error) {
	id := c.cfg.NomadJobID(jobID)
	var out []jobs.Worker
	err := c.do(ctx, "read", id, func(ctx context.Context) error {
		out = nil
		allocs, _, err := c.client.Jobs().Allocations(id, false, c.q(ctx))
		if err != nil {
			return err
		}
		for _, a := range allocs {
			if a.TaskGroup != GroupName {
				continue
			}
			w := jobs.Worker{ID: a.ID, JobID: jobID, Index: nameIndex(a.Name), Node: a.NodeID,
				State: workerState(a.DesiredStatus, a.ClientStatus)}
			if w.State.Live() {
				full, _, err := c.client.Allocations().Info(a.ID, c.q(ctx))
				if err != nil && !notFound(err) {
					return err
				}
				if full != nil {
					w.GPUs = gpuIDs(full.AllocatedResources)
				}
			}
			out = append(out, w)
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, err
}
