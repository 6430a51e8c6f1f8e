package nomadx

import (
	"fmt"
	"net/url"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/hashicorp/nomad/api"
)

// Names in the Nomad job every edl job gets.
const (
	GroupName = "workers"
	TaskName  = "worker"
	// MetaJobID and MetaTenant are set in the Nomad job's meta; MetaJobID is
	// how an existing Nomad job is recognised as edl's (adoption).
	MetaJobID  = "edl_job_id"
	MetaTenant = "edl_tenant"
	// DeviceName is what the NVIDIA device plugin fingerprints.
	DeviceName = "nvidia/gpu"
)

// Restart and reschedule policies for elastic workers. A worker that dies
// costs its job one member, not the job: the survivors go on in a smaller
// generation and a replacement joins stop-free. So Nomad should retry
// quickly and then let go: one in-place restart after 5 s (a transient
// crash rejoins on the same GPU), then mode "fail"; then at most two
// reschedules an hour to other nodes, 5 s apart (a bad node is left
// behind). Nomad's batch default (3 restarts 15 s apart, then one
// reschedule) keeps a GPU idle for 45 s and more while the job has
// already shrunk. A worker that still fails is left failed: the planner
// sees it, and the next Scale of the job replaces it or the job is failed.
func restartPolicy() *api.RestartPolicy {
	return &api.RestartPolicy{Attempts: ptr(1), Delay: ptr(5 * time.Second), Interval: ptr(5 * time.Minute), Mode: ptr("fail")}
}

func reschedulePolicy() *api.ReschedulePolicy {
	return &api.ReschedulePolicy{Attempts: ptr(2), Interval: ptr(time.Hour), Delay: ptr(5 * time.Second),
		DelayFunction: ptr("constant"), MaxDelay: ptr(time.Duration(0)), Unlimited: ptr(false)}
}

func ptr[T any](v T) *T { return &v }

// NomadJobID is the Nomad job ID of an edl job.
func (c Config) NomadJobID(edlJobID string) string { return c.JobPrefix + edlJobID }

// workerArgs are the arguments of `edl worker`.
func (c Config) workerArgs(jobID string) []string {
	redisURL := c.RedisURL
	if c.WorkerRedisAuth != nil {
		if u, err := url.Parse(redisURL); err == nil && u.User != nil {
			u.User = nil // the login is the task's, in its environment
			redisURL = u.String()
		}
	}
	return []string{"worker", "--job", jobID, "--redis", redisURL, "--store", c.StoreURL}
}

// JobTemplate is the Nomad job for an edl job with count workers: type
// batch (batch jobs have no deployments, which would block scaling), no
// update block (Nomad refuses one on a batch job), group "workers", task
// "worker" with SIGTERM and KillTimeout for a graceful exit, and for GPU
// jobs a device "nvidia/gpu" block with the spec's count and constraints.
func JobTemplate(cfg Config, job jobs.Job, count int) *api.Job {
	id := cfg.NomadJobID(job.ID)
	task := &api.Task{
		Name:        TaskName,
		Driver:      string(cfg.Driver),
		KillSignal:  "SIGTERM",
		KillTimeout: ptr(cfg.KillTimeout),
		Resources:   &api.Resources{CPU: ptr(cfg.CPUMHz), MemoryMB: ptr(cfg.MemoryMiB)},
		Meta:        map[string]string{MetaJobID: job.ID},
	}
	args := cfg.workerArgs(job.ID)
	switch cfg.Driver {
	case DriverDocker:
		image := cfg.Image
		if ex := job.Spec.Trainer.Exec; ex != nil && ex.Image != "" {
			image = ex.Image
		}
		task.Config = map[string]any{"image": image, "args": args}
		if cfg.Command != "" {
			task.Config["command"] = cfg.Command
		}
	default:
		task.Config = map[string]any{"command": cfg.Command, "args": args}
	}
	if len(cfg.WorkerEnv) > 0 || cfg.WorkerRedisAuth != nil {
		task.Env = map[string]string{}
		for k, v := range cfg.WorkerEnv {
			task.Env[k] = v
		}
	}
	if cfg.WorkerRedisAuth != nil {
		task.Env["EDL_REDIS_USER"], task.Env["EDL_REDIS_PASSWORD"] = cfg.WorkerRedisAuth(job.ID)
	}
	if g := job.Spec.GPUsPerWorker; g > 0 {
		dev := &api.RequestedDevice{Name: DeviceName, Count: ptr(uint64(g))}
		if c := job.Spec.GPU; c != nil {
			if c.MinMemoryMiB > 0 {
				// The NVIDIA plugin reports memory as an integer in MiB;
				// Nomad compares with units.
				dev.Constraints = append(dev.Constraints, &api.Constraint{
					LTarget: "${device.attr.memory}", Operand: ">=", RTarget: fmt.Sprintf("%d MiB", c.MinMemoryMiB)})
			}
			if c.Model != "" {
				dev.Constraints = append(dev.Constraints, &api.Constraint{
					LTarget: "${device.model}", Operand: "=", RTarget: c.Model})
			}
		}
		task.Resources.Devices = []*api.RequestedDevice{dev}
	}
	nj := &api.Job{
		ID:          &id,
		Name:        &id,
		Type:        ptr("batch"),
		Datacenters: append([]string(nil), cfg.Datacenters...),
		Meta:        map[string]string{MetaJobID: job.ID, MetaTenant: job.Tenant},
		TaskGroups: []*api.TaskGroup{{
			Name:             ptr(GroupName),
			Count:            ptr(count),
			RestartPolicy:    restartPolicy(),
			ReschedulePolicy: reschedulePolicy(),
			Tasks:            []*api.Task{task},
		}},
	}
	if job.Spec.Trainer.Kind == jobs.TrainerExec {
		execTemplate(cfg, job, nj.TaskGroups[0], task) // template_exec.go
	}
	if cfg.Region != "" {
		nj.Region = ptr(cfg.Region)
	}
	if cfg.Namespace != "" {
		nj.Namespace = ptr(cfg.Namespace)
	}
	if cfg.NodePool != "" {
		nj.NodePool = ptr(cfg.NodePool)
	}
	return nj
}
