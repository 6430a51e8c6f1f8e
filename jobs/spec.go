package jobs

import "time"

// Spec is what a tenant submits: everything needed to run a training job.
// Validation lives in validate.go; the JSON names are the public API.
type Spec struct {
	Name          string            `json:"name" validate:"required" maxLength:"63" example:"mlp-synthetic"`
	Workers       WorkerRange       `json:"workers" validate:"required"`
	GPUsPerWorker int               `json:"gpus_per_worker" minimum:"0" maximum:"16"`
	GPU           *GPUConstraint    `json:"gpu,omitempty"`
	Priority      Priority          `json:"priority" default:"guaranteed"`
	Trainer       Trainer           `json:"trainer" validate:"required"`
	Checkpoint    CheckpointPolicy  `json:"checkpoint"`
	CallbackURL   string            `json:"callback_url,omitempty" example:"https://ci.example.com/hook"`
	Labels        map[string]string `json:"labels,omitempty"`
	// Deadline, Within and DeadlinePolicy make it a deadline job: the
	// planner picks its workers (workers.min is not needed, workers.max
	// is an optional cap) so that it is done in time (deadline.go).
	Deadline       *time.Time     `json:"deadline,omitempty" example:"2026-12-02T06:00:00Z"`
	Within         string         `json:"within,omitempty" example:"2h"`
	DeadlinePolicy DeadlinePolicy `json:"deadline_policy,omitempty" enum:"strict,best_effort" default:"strict"`
	// PerWorkerSpeed is the prior the planner assumes for one worker
	// (samples/s; steps/s for exec jobs) until the job has run.
	PerWorkerSpeed float64 `json:"per_worker_speed,omitempty" minimum:"0" example:"2000"`
}

// WorkerRange bounds the number of workers the planner may give a job.
type WorkerRange struct {
	Min int `json:"min" minimum:"1" maximum:"1024" example:"1"`
	Max int `json:"max" minimum:"1" maximum:"1024" example:"3"`
}

// GPUConstraint restricts which GPUs a worker may land on.
type GPUConstraint struct {
	Model        string `json:"model,omitempty"`
	MinMemoryMiB int    `json:"min_memory_mib,omitempty"`
}

// Priority decides who yields first when GPUs are short.
type Priority string

const (
	// Guaranteed jobs get at least their minimum before anything else.
	Guaranteed Priority = "guaranteed"
	// Opportunistic jobs harvest idle GPUs and give them back first.
	Opportunistic Priority = "opportunistic"
)

// TrainerKind says how the workers train.
type TrainerKind string

const (
	// TrainerBuiltin is edl's own MLP trainer, resized in place.
	TrainerBuiltin TrainerKind = "builtin"
	// TrainerExec runs a user's program; resizes restart it from a checkpoint.
	TrainerExec TrainerKind = "exec"
)

// The metrics the built-in trainer reports to a job's metric log: the
// training loss at its steps, and at each epoch's end the loss and
// accuracy on held-out samples. A sweep of built-in trials judges one.
const (
	MetricLoss        = "loss"
	MetricValLoss     = "val_loss"
	MetricValAccuracy = "val_accuracy"
)

// BuiltinMetrics lists the built-in trainer's metrics.
var BuiltinMetrics = []string{MetricLoss, MetricValLoss, MetricValAccuracy}

// Trainer selects and configures the training program; exactly one of
// Builtin and Exec is set, matching Kind.
type Trainer struct {
	Kind    TrainerKind     `json:"kind" validate:"required"`
	Builtin *BuiltinTrainer `json:"builtin,omitempty"`
	Exec    *ExecTrainer    `json:"exec,omitempty"`
}

// BuiltinTrainer is a multi-layer perceptron trained with SGD and momentum on
// a synthetic classification data set generated from a seed.
type BuiltinTrainer struct {
	Model        MLPModel         `json:"model"`
	Dataset      SyntheticDataset `json:"dataset"`
	Epochs       int              `json:"epochs"`
	BatchSize    int              `json:"batch_size"` // global batch at the job's initial size
	LearningRate float64          `json:"learning_rate"`
	Momentum     float64          `json:"momentum"`
	BatchPolicy  BatchPolicy      `json:"batch_policy,omitempty"` // default fixed_global
}

// MLPModel is the network's hidden layer widths; input and output sizes come
// from the data set.
type MLPModel struct {
	Hidden []int `json:"hidden"`
}

// SyntheticDataset is labelled data made by a fixed random teacher network.
type SyntheticDataset struct {
	Seed       int64 `json:"seed"`
	Samples    int   `json:"samples"`
	Features   int   `json:"features"`
	Classes    int   `json:"classes"`
	Partitions int   `json:"partitions"`
}

// BatchPolicy says what stays fixed when the world size changes.
type BatchPolicy string

const (
	// FixedGlobal keeps the global batch; each worker's share changes.
	FixedGlobal BatchPolicy = "fixed_global"
	// FixedLocal keeps each worker's batch and scales the learning rate
	// linearly with the world size.
	FixedLocal BatchPolicy = "fixed_local"
)

// ExecTrainer runs a user's program (a script written for torchrun) with
// torchrun's environment; a resize stops every process and starts it again
// with the new world, and the program resumes from its own checkpoint in
// EDL_CHECKPOINT_DIR (restart mode; see docs/exec.md).
type ExecTrainer struct {
	// Command is the program and its arguments (argv, no shell).
	Command []string `json:"command" validate:"required" example:"/usr/bin/python3,examples/torch/train.py"`
	// Image is the container image on Nomad's docker driver; "" means the
	// cluster's worker image.
	Image string `json:"image,omitempty" maxLength:"512" example:"registry.internal/ml/trainer:1.0"`
	// Env is added to the program's environment; the variables edl sets
	// (torchrun's and EDL_*) are reserved.
	Env map[string]string `json:"env,omitempty"`
	// Workdir is the program's working directory; relative paths are taken
	// from the worker's own; "" means the worker's.
	Workdir string `json:"workdir,omitempty" maxLength:"4096" example:"/opt/train"`
	// Dataset, when set, describes the program's data set so edl can hand
	// out sample ranges (used by the live mode); restart mode ignores it.
	Dataset *ExecDataset `json:"dataset,omitempty"`
	// GracePeriodS is how long the program has between SIGTERM and
	// SIGKILL at a resize, a stop or a cancel; default 30.
	GracePeriodS *int `json:"grace_period_s,omitempty" minimum:"0" maximum:"3600" default:"30"`
	// MaxRestarts is how many times a program that failed (exited non-zero
	// on its own) is started again before the job fails; resizes do not
	// count. Default 3.
	MaxRestarts *int `json:"max_restarts,omitempty" minimum:"0" maximum:"1000" default:"3"`
	// Mode is "restart" (default: every resize restarts the program) or
	// "live" (the program uses the edl Python package and resizes in
	// process; needs Dataset; see docs/live.md).
	Mode ExecMode `json:"mode,omitempty" enum:"restart,live" default:"restart"`
	// TotalSteps is the program's work in steps: a deadline job needs it
	// (the program reports its step in $EDL_METRICS_FILE, see docs/exec.md).
	TotalSteps int64 `json:"total_steps,omitempty" minimum:"0" example:"10000"`
	// Warm, in restart mode, starts each run of a Python program in an
	// interpreter started ahead of need with Preload imported, so a restart
	// does not wait for Python's start and `import torch`; false starts
	// every run cold. Default true. A command that is not `python SCRIPT`
	// or `python -m MODULE` always starts cold (see docs/exec.md).
	Warm *bool `json:"warm,omitempty" default:"true"`
	// Preload are the modules a warm interpreter imports before the run
	// it waits for; default ["torch"]. They are imported before the
	// generation is known: a module that reads RANK or WORLD_SIZE at import
	// does not belong here.
	Preload []string `json:"preload,omitempty" maxItems:"32" example:"torch,torchvision"`
}

// DefaultPreload is what a warm interpreter imports when the spec names
// nothing.
var DefaultPreload = []string{"torch"}

// WarmStart reports whether restart mode starts runs warm.
func (e ExecTrainer) WarmStart() bool { return e.Warm == nil || *e.Warm }

// Preloads is the spec's preload list, or DefaultPreload.
func (e ExecTrainer) Preloads() []string {
	if len(e.Preload) == 0 {
		return append([]string(nil), DefaultPreload...)
	}
	return append([]string(nil), e.Preload...)
}

// ExecMode is how an exec program goes through a resize.
type ExecMode string

const (
	// ExecRestart stops and restarts the program at every resize.
	ExecRestart ExecMode = "restart"
	// ExecLive keeps the program running: it talks to its worker over a
	// Unix socket (the edl Python package) and rebuilds its process group
	// in process at every generation.
	ExecLive ExecMode = "live"
)

// Live reports whether the program runs in live mode.
func (e ExecTrainer) Live() bool { return e.Mode == ExecLive }

// ExecDataset is the size of an exec program's data set.
type ExecDataset struct {
	Samples    int64 `json:"samples" minimum:"1" maximum:"1000000000000" example:"60000"`
	Partitions int   `json:"partitions" minimum:"1" maximum:"1000000" example:"64"`
}

// Defaults of an exec trainer's optional fields.
const (
	DefaultGracePeriodS = 30
	DefaultMaxRestarts  = 3
)

// Grace is the SIGTERM-to-SIGKILL period, the default when unset.
func (e ExecTrainer) Grace() int {
	if e.GracePeriodS == nil {
		return DefaultGracePeriodS
	}
	return *e.GracePeriodS
}

// Restarts is the restart budget for failures, the default when unset.
func (e ExecTrainer) Restarts() int {
	if e.MaxRestarts == nil {
		return DefaultMaxRestarts
	}
	return *e.MaxRestarts
}

// CheckpointPolicy says how often the leader checkpoints and how many to keep.
type CheckpointPolicy struct {
	EverySteps int `json:"every_steps" minimum:"0"`
	Keep       int `json:"keep" minimum:"1" maximum:"100" default:"3"`
}
