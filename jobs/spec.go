package jobs

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

// ExecTrainer runs a user's program with torchrun-compatible environment.
type ExecTrainer struct {
	Command []string          `json:"command"`
	Image   string            `json:"image,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// CheckpointPolicy says how often the leader checkpoints and how many to keep.
type CheckpointPolicy struct {
	EverySteps int `json:"every_steps" minimum:"0"`
	Keep       int `json:"keep" minimum:"1" maximum:"100" default:"3"`
}
