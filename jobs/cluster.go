package jobs

import "time"

// GPUClass is a set of interchangeable GPUs: same model, same memory.
// The zero class means CPU-only capacity.
type GPUClass struct {
	Model     string `json:"model"`
	MemoryMiB int    `json:"memory_mib"`
}

// Node is one machine's capacity as the cluster reports it. Free counts are
// what live workers (of any job) do not hold.
type Node struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Class    GPUClass `json:"class"`
	GPUs     int      `json:"gpus"`      // healthy GPU instances
	FreeGPUs int      `json:"free_gpus"` // not held by a live worker
	// ForeignGPUs are the GPUs that live allocations of jobs other than
	// edl's hold (another team's Nomad jobs on a shared cluster): they are
	// neither free nor edl's to plan on. GPUs - ForeignGPUs is what edl can
	// use on the node (UsableGPUs). Always 0 on the local cluster.
	ForeignGPUs int `json:"foreign_gpus"`
	// CPUSlots is how many CPU-only workers (gpus_per_worker = 0) fit.
	CPUSlots     int `json:"cpu_slots"`
	FreeCPUSlots int `json:"free_cpu_slots"`
}

// UsableGPUs is how many of the node's GPUs edl may plan on: the healthy
// ones less those held by other jobs than edl's (never below FreeGPUs,
// never negative).
func (n Node) UsableGPUs() int {
	return max(n.GPUs-n.ForeignGPUs, n.FreeGPUs, 0)
}

// Capacity is the whole cluster's capacity at one moment.
type Capacity struct {
	Nodes []Node `json:"nodes"`
}

// WorkerState is where a placed worker is in its life, as the cluster sees it.
type WorkerState string

const (
	WorkerPending  WorkerState = "pending"  // asked for, not yet running (or blocked)
	WorkerRunning  WorkerState = "running"  // process up
	WorkerStopping WorkerState = "stopping" // told to stop, not yet gone
	WorkerComplete WorkerState = "complete" // exited 0
	WorkerFailed   WorkerState = "failed"   // exited non-zero or lost
)

// Live reports whether the worker holds (or is about to hold) resources.
func (s WorkerState) Live() bool {
	return s == WorkerPending || s == WorkerRunning || s == WorkerStopping
}

// Worker is one placed worker of a job (a Nomad allocation or a local process).
type Worker struct {
	ID    string      `json:"id"` // allocation ID or local worker ID
	JobID string      `json:"job_id"`
	Index int         `json:"index"` // name index: workers[N]
	Node  string      `json:"node"`
	State WorkerState `json:"state"`
	GPUs  []string    `json:"gpus,omitempty"` // device IDs held
	// ExitCode is the exit status of a worker that has exited (complete or
	// failed), where the cluster knows it; -1 when it was killed or lost.
	ExitCode *int `json:"exit_code,omitempty"`
	// Queued marks a worker the cluster was asked for but has not placed
	// yet (Nomad: a blocked evaluation, or one not processed yet): State
	// pending, ID "queued-<index>", no node, no GPUs.
	Queued bool `json:"queued,omitempty"`
	// Draining says the worker's node is draining: it should move off.
	Draining bool `json:"draining,omitempty"`
	// DesiredStatus and ClientStatus are the cluster's own words (Nomad's
	// allocation statuses), for display; empty where there are none.
	DesiredStatus string `json:"desired_status,omitempty"`
	ClientStatus  string `json:"client_status,omitempty"`
	// Started is when the worker's process (task) started; zero if not yet.
	Started time.Time `json:"started,omitzero"`
}
