package nomadx

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/edl-nomad/edl/jobs"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// recorded decodes a body recorded from Nomad 1.6.1 (nomadtest/testdata).
func recorded[T any](t *testing.T, name string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("nomadtest", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// TestCapacityOfCountsForeignGPUs runs capacityOf on the recorded bodies:
// GET /v1/nodes?resources=true (node-1, four H200 instances gpu0..gpu3) and
// the recorded allocation of job train-fx (namespace default, gpu0), which
// is not edl's (its ID lacks the prefix edl-), varied in job ID, namespace
// and status. An allocation of /v1/allocations?resources=true is the
// recorded allocation's stub: same keys for what capacityOf reads.
func TestCapacityOfCountsForeignGPUs(t *testing.T) {
	nodes := recorded[[]*api.NodeListStub](t, "nodes-list-resources.json")
	base := recorded[api.AllocationListStub](t, "allocation.json")
	if base.JobID != "train-fx" || base.Namespace != "default" || base.DesiredStatus != "run" || base.ClientStatus != "running" ||
		len(gpuIDs(base.AllocatedResources)) != 1 || gpuIDs(base.AllocatedResources)[0] != "gpu0" {
		t.Fatalf("recorded allocation changed: %s/%s %s/%s %v", base.Namespace, base.JobID,
			base.DesiredStatus, base.ClientStatus, gpuIDs(base.AllocatedResources))
	}
	alloc := func(f func(a *api.AllocationListStub)) *api.AllocationListStub {
		a := base
		ar := *base.AllocatedResources
		ar.Tasks = map[string]*api.AllocatedTaskResources{}
		for k, v := range base.AllocatedResources.Tasks {
			tr := *v
			tr.Devices = nil
			for _, d := range v.Devices {
				dd := *d
				dd.DeviceIDs = append([]string(nil), d.DeviceIDs...)
				tr.Devices = append(tr.Devices, &dd)
			}
			ar.Tasks[k] = &tr
		}
		a.AllocatedResources = &ar
		if f != nil {
			f(&a)
		}
		return &a
	}
	gpus := func(ids ...string) func(a *api.AllocationListStub) {
		return func(a *api.AllocationListStub) { a.AllocatedResources.Tasks["worker"].Devices[0].DeviceIDs = ids }
	}
	job := func(ns, id string, more ...func(a *api.AllocationListStub)) func(a *api.AllocationListStub) {
		return func(a *api.AllocationListStub) {
			a.Namespace, a.JobID = ns, id
			for _, f := range more {
				f(a)
			}
		}
	}
	own := ownJobs{ns: "default", prefix: "edl-"}
	node := func(free, foreign, freeSlots int) jobs.Node {
		// 5192 MHz, 24105 MB: 5 slots of 1000 MHz / 2048 MiB; each
		// recorded allocation holds 100 MHz and 64 MB.
		return jobs.Node{ID: "d746331a-bed4-0489-02a7-21b35330cd05", Name: "node-1", Class: jobs.GPUClass{Model: "H200"},
			GPUs: 4, FreeGPUs: free, ForeignGPUs: foreign, CPUSlots: 5, FreeCPUSlots: freeSlots}
	}
	for _, tc := range []struct {
		name   string
		own    ownJobs
		allocs []*api.AllocationListStub
		want   jobs.Node
	}{
		{"nothing runs", own, nil, node(4, 0, 5)},
		{"another team's job (recorded train-fx)", own, []*api.AllocationListStub{alloc(nil)}, node(3, 1, 5)},
		{"edl's own worker", own, []*api.AllocationListStub{alloc(job("default", "edl-j1"))}, node(3, 0, 5)},
		{"edl's and a foreign one", own, []*api.AllocationListStub{
			alloc(job("default", "edl-j1", gpus("gpu1", "gpu2"))), alloc(gpus("gpu0", "gpu3"))}, node(0, 2, 4)},
		{"edl's prefix in another namespace is foreign", own, []*api.AllocationListStub{
			alloc(job("research", "edl-j1"))}, node(3, 1, 5)},
		{"configured prefix and namespace", ownJobs{ns: "ml", prefix: "team-a."}, []*api.AllocationListStub{
			alloc(job("ml", "team-a.j1", gpus("gpu1"))), alloc(job("ml", "edl-j1", gpus("gpu2"))), alloc(nil)}, node(1, 2, 4)},
		{"foreign allocation stopping (desired stop): its devices are free", own, []*api.AllocationListStub{
			alloc(func(a *api.AllocationListStub) { a.DesiredStatus = "stop" })}, node(4, 0, 5)},
		{"foreign allocation finished", own, []*api.AllocationListStub{
			alloc(func(a *api.AllocationListStub) { a.ClientStatus = "complete" })}, node(4, 0, 5)},
		{"foreign allocation pending (placed, not started) holds its GPU", own, []*api.AllocationListStub{
			alloc(func(a *api.AllocationListStub) { a.ClientStatus = "pending" })}, node(3, 1, 5)},
		{"foreign allocation on an unknown GPU ID (unhealthy, gone)", own, []*api.AllocationListStub{
			alloc(gpus("gpu9"))}, node(4, 0, 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := capacityOf(nodes, tc.allocs, 1000, 2048, tc.own)
			if d := cmp.Diff([]jobs.Node{tc.want}, got.Nodes); d != "" {
				t.Errorf("capacity (-want +got):\n%s", d)
			}
			if u := got.Nodes[0].UsableGPUs(); u != tc.want.GPUs-tc.want.ForeignGPUs {
				t.Errorf("UsableGPUs = %d, want %d", u, tc.want.GPUs-tc.want.ForeignGPUs)
			}
		})
	}
}
