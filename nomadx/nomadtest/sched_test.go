package nomadtest

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

func batchJob(id string, count int, dev *api.RequestedDevice) *api.Job {
	task := &api.Task{Name: "worker", Driver: "exec", KillSignal: "SIGTERM",
		Config:    map[string]any{"command": "edl"},
		Resources: &api.Resources{CPU: ptr(100), MemoryMB: ptr(64)}}
	if dev != nil {
		task.Resources.Devices = []*api.RequestedDevice{dev}
	}
	return &api.Job{ID: &id, Type: ptr("batch"), Datacenters: []string{"dc1"},
		TaskGroups: []*api.TaskGroup{{Name: ptr("workers"), Count: &count, Tasks: []*api.Task{task}}}}
}

func gpus(n uint64, cs ...*api.Constraint) *api.RequestedDevice {
	return &api.RequestedDevice{Name: "nvidia/gpu", Count: &n, Constraints: cs}
}

// placed returns "node:devices" of a job's live allocations, sorted.
func placed(s *Server, id string) []string {
	var out []string
	for _, a := range s.Allocations("default", id) {
		if a.DesiredStatus != "run" || terminalClient(a.ClientStatus) {
			continue
		}
		out = append(out, fmt.Sprintf("%s:%v", a.NodeName, a.AllocatedResources.Tasks["worker"].Devices[0].DeviceIDs))
	}
	sort.Strings(out)
	return out
}

func summaryOf(t *testing.T, c *api.Client, id string) api.TaskGroupSummary {
	t.Helper()
	sum, _, err := c.Jobs().Summary(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sum.Summary["workers"]
}

func TestDeviceFeasibilityPerNode(t *testing.T) {
	s := New(t, Config{Sync: true, Nodes: []NodeSpec{
		{Name: "small", GPUs: 2, Model: "L4", MemoryMiB: 23034, UniqueGPUIDs: true},
		{Name: "big", GPUs: 2, Model: "H200", MemoryMiB: 143771, UniqueGPUIDs: true},
	}})
	c := s.Client()
	mem := func(v string) *api.Constraint {
		return &api.Constraint{LTarget: "${device.attr.memory}", Operand: ">=", RTarget: v}
	}
	model := func(v string) *api.Constraint {
		return &api.Constraint{LTarget: "${device.model}", Operand: "=", RTarget: v}
	}
	cases := []struct {
		name   string
		dev    *api.RequestedDevice
		count  int
		want   []string
		queued int
	}{
		{"memory in MiB picks the big node", gpus(1, mem("40960 MiB")), 1, []string{"big:[big-gpu0]"}, 0},
		{"memory in GiB", gpus(1, mem("100 GiB")), 1, []string{"big:[big-gpu0]"}, 0},
		{"model", gpus(2, model("L4")), 1, []string{"small:[small-gpu0 small-gpu1]"}, 0},
		{"count larger than any node", gpus(3), 1, nil, 1},
		{"no device matches", gpus(1, mem("200 GiB")), 1, nil, 1},
		{"fills what fits, queues the rest", gpus(1, model("H200")), 3, []string{"big:[big-gpu0]", "big:[big-gpu1]"}, 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("dev-%d", i)
			if _, _, err := c.Jobs().Register(batchJob(id, tc.count, tc.dev), nil); err != nil {
				t.Fatal(err)
			}
			defer c.Jobs().Deregister(id, true, nil)
			if d := cmp.Diff(tc.want, placed(s, id)); d != "" {
				t.Errorf("placement (-want +got):\n%s", d)
			}
			if q := summaryOf(t, c, id).Queued; q != tc.queued {
				t.Errorf("queued = %d, want %d", q, tc.queued)
			}
		})
	}
}

func TestBlockedPlacementLandsWhenGPUFrees(t *testing.T) {
	s := New(t, Config{Sync: true, Nodes: []NodeSpec{{Name: "n", GPUs: 2}}})
	c := s.Client()
	if _, _, err := c.Jobs().Register(batchJob("a", 2, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(batchJob("b", 1, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	if q := summaryOf(t, c, "b").Queued; q != 1 {
		t.Fatalf("b queued = %d, want 1", q)
	}
	_, qm, err := c.Jobs().Allocations("b", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A blocking query on b's allocations wakes when a's purge frees a GPU.
	done := make(chan []*api.AllocationListStub, 1)
	go func() {
		allocs, _, _ := c.Jobs().Allocations("b", false, &api.QueryOptions{WaitIndex: qm.LastIndex, WaitTime: 10 * time.Second})
		done <- allocs
	}()
	time.Sleep(50 * time.Millisecond)
	if _, _, err := c.Jobs().Deregister("a", true, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case allocs := <-done:
		if len(allocs) != 1 || allocs[0].Name != "b.workers[0]" || allocs[0].ClientStatus != "running" {
			t.Errorf("b after a GPU freed: %+v", allocs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocking query did not wake")
	}
	if q := summaryOf(t, c, "b").Queued; q != 0 {
		t.Errorf("b queued = %d after placement", q)
	}
}

func TestCompletedAllocNotReplacedUntilNextScale(t *testing.T) {
	s := New(t, Config{Sync: true})
	c := s.Client()
	if _, _, err := c.Jobs().Register(batchJob("c", 2, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	allocs := s.Allocations("default", "c")
	if err := s.MarkComplete(allocs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := len(placed(s, "c")); n != 1 {
		t.Fatalf("live after one completes = %d, want 1 (not replaced)", n)
	}
	// Any Scale, even to the same count, makes a new version: the finished
	// allocation stops counting and a new one is placed.
	if _, _, err := c.Jobs().Scale("c", "workers", ptr(2), "same count", false, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(placed(s, "c")); n != 2 {
		t.Errorf("live after scale to the same count = %d, want 2", n)
	}
}

func TestDeploymentBlocksScalingOfServiceJob(t *testing.T) {
	s := New(t, Config{Sync: true})
	c := s.Client()
	j := batchJob("svc", 1, nil)
	j.Type = ptr("service")
	j.TaskGroups[0].Update = &api.UpdateStrategy{MaxParallel: ptr(1)}
	if _, _, err := c.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Jobs().Scale("svc", "workers", ptr(2), "", false, nil, nil)
	var ue api.UnexpectedResponseError
	if !errors.As(err, &ue) || ue.StatusCode() != 400 || ue.Body() != "job scaling blocked due to active deployment" {
		t.Fatalf("scale during deployment: %v", err)
	}
	if err := s.SetDeploymentStatus("default", "svc", "successful"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Scale("svc", "workers", ptr(2), "", false, nil, nil); err != nil {
		t.Errorf("scale after deployment: %v", err)
	}
}

func TestManualClientAndInjectedFaults(t *testing.T) {
	s := New(t, Config{Sync: true, ManualClient: true})
	c := s.Client()
	if _, _, err := c.Jobs().Register(batchJob("m", 1, gpus(1)), nil); err != nil {
		t.Fatal(err)
	}
	a := s.Allocations("default", "m")[0]
	if a.ClientStatus != "pending" {
		t.Fatalf("status %s, want pending until MarkRunning", a.ClientStatus)
	}
	if err := s.MarkRunning(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Allocations().Stop(&api.Allocation{ID: a.ID}, nil); err != nil {
		t.Fatal(err)
	}
	got, _, _ := c.Allocations().Info(a.ID, nil)
	if got.DesiredStatus != "stop" || got.ClientStatus != "running" {
		t.Errorf("stopped alloc before the client ends it: %s/%s", got.DesiredStatus, got.ClientStatus)
	}
	if err := s.MarkComplete(a.ID); err != nil {
		t.Fatal(err)
	}
	s.AddFault(Fault{PathPrefix: "/v1/job/m", Status: 502, Body: "bad gateway"})
	_, _, err := c.Jobs().Info("m", nil)
	var ue api.UnexpectedResponseError
	if !errors.As(err, &ue) || ue.StatusCode() != 502 || ue.Body() != "bad gateway" {
		t.Errorf("injected fault: %v", err)
	}
	if _, _, err := c.Jobs().Info("m", nil); err != nil {
		t.Errorf("fault applied twice: %v", err)
	}
}
