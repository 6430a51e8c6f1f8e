package jobs

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Bounds of a spec; the API documents them and the validator enforces them.
const (
	MaxWorkers       = 1024
	MaxGPUsPerWorker = 16
	MaxLabels        = 32
	MaxLabelKeyLen   = 63
	MaxLabelValueLen = 256
	MaxNameLen       = 63
	MaxCallbackLen   = 2048
	MaxHiddenLayers  = 8
	MaxLayerWidth    = 8192
	MaxExecArgs      = 256
	MaxExecArgLen    = 4096
	MaxExecEnv       = 128
	MaxCheckpoints   = 100
	DefaultKeep      = 3
	// MaxParameters bounds a built-in model's parameter count (weights and
	// biases): 64 Mi float32 values, 256 MiB, held three times by each
	// worker (parameters, gradient, momentum). A tenant's max_parameters
	// may lower it.
	MaxParameters = 64 << 20
	// MaxBatchValues bounds batch_size x the sum of the layer widths
	// (features + hidden + classes): the activations of one step at world
	// size 1, 128 Mi float32 values (512 MiB), kept again for the gradient.
	MaxBatchValues = 128 << 20
)

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	labelKeyRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// reservedEnv are set by the worker for exec-mode programs: torchrun's
// names and edl's own (see worker/core/execenv.go).
var reservedEnv = map[string]bool{
	"RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "LOCAL_WORLD_SIZE": true,
	"GROUP_RANK": true, "GROUP_WORLD_SIZE": true, "ROLE_RANK": true, "ROLE_NAME": true, "ROLE_WORLD_SIZE": true,
	"MASTER_ADDR": true, "MASTER_PORT": true,
	"TORCHELASTIC_RESTART_COUNT": true, "TORCHELASTIC_MAX_RESTARTS": true, "TORCHELASTIC_RUN_ID": true,
	"TORCHELASTIC_USE_AGENT_STORE": true, "TORCHELASTIC_ERROR_FILE": true,
	"EDL_JOB_ID": true, "EDL_GENERATION": true, "EDL_CHECKPOINT_DIR": true, "CUDA_VISIBLE_DEVICES": true,
	"EDL_SOCKET": true, "EDL_WORKER_ID": true, // live mode (worker/live)
}

// ReservedEnv reports whether the worker sets the variable name for an
// exec program itself (a spec may not set it).
func ReservedEnv(name string) bool { return reservedEnv[name] }

// Bounds of an exec trainer.
const (
	MaxWorkdirLen   = 4096
	MaxGracePeriodS = 3600
	MaxExecRestarts = 1000
)

// WithDefaults returns s with the optional fields that have a default filled:
// priority guaranteed, batch policy fixed_global, checkpoint keep 3, exec
// grace_period_s 30 and max_restarts 3.
func (s Spec) WithDefaults() Spec {
	s = s.withDeadlineDefaults()
	if s.Priority == "" {
		s.Priority = Guaranteed
	}
	if s.Trainer.Builtin != nil && s.Trainer.Builtin.BatchPolicy == "" {
		b := *s.Trainer.Builtin
		b.BatchPolicy = FixedGlobal
		s.Trainer.Builtin = &b
	}
	if s.Checkpoint.Keep == 0 {
		s.Checkpoint.Keep = DefaultKeep
	}
	if e := s.Trainer.Exec; e != nil && (e.GracePeriodS == nil || e.MaxRestarts == nil) {
		c := *e
		grace, restarts := c.Grace(), c.Restarts()
		c.GracePeriodS, c.MaxRestarts = &grace, &restarts
		s.Trainer.Exec = &c
	}
	return s
}

// Validate checks every field and returns a *ValidationError listing all
// that are wrong, or nil. It does not apply defaults (see WithDefaults).
func (s Spec) Validate() error {
	v := &ValidationError{}
	switch {
	case s.Name == "":
		v.add("name", "required")
	case len(s.Name) > MaxNameLen || !nameRE.MatchString(s.Name):
		v.add("name", "must be 1-%d lowercase letters, digits or '-', starting and ending with a letter or digit", MaxNameLen)
	}
	validateWorkers(v, s.Workers)
	if s.GPUsPerWorker < 0 || s.GPUsPerWorker > MaxGPUsPerWorker {
		v.add("gpus_per_worker", "must be between 0 (CPU workers) and %d", MaxGPUsPerWorker)
	}
	if s.GPU != nil {
		if s.GPUsPerWorker == 0 {
			v.add("gpu", "set only when gpus_per_worker > 0")
		}
		switch {
		case len(s.GPU.Model) > 128 || strings.ContainsFunc(s.GPU.Model, isControl):
			v.add("gpu.model", "must be at most 128 printable characters")
		case strings.Contains(s.GPU.Model, "${"):
			// The model is the value of a device constraint, which Nomad
			// interpolates: "${device.model}" would match every GPU on
			// Nomad while the planner, comparing it literally, matches none.
			v.add("gpu.model", "must be a GPU model as the device plugin reports it; ${...} is Nomad interpolation, not allowed")
		}
		if s.GPU.MinMemoryMiB < 0 || s.GPU.MinMemoryMiB > 1<<22 {
			v.add("gpu.min_memory_mib", "must be between 0 and %d", 1<<22)
		}
	}
	switch s.Priority {
	case Guaranteed, Opportunistic:
	default:
		v.add("priority", "must be %q or %q", Guaranteed, Opportunistic)
	}
	validateTrainer(v, s.Trainer)
	if s.Checkpoint.EverySteps < 0 || s.Checkpoint.EverySteps > 1e9 {
		v.add("checkpoint.every_steps", "must be between 0 (epoch ends and cancel only) and 1000000000")
	}
	if s.Checkpoint.Keep < 1 || s.Checkpoint.Keep > MaxCheckpoints {
		v.add("checkpoint.keep", "must be between 1 and %d", MaxCheckpoints)
	}
	if s.CallbackURL != "" {
		if reason := checkCallback(s.CallbackURL); reason != "" {
			v.add("callback_url", "%s", reason)
		}
	}
	validateLabels(v, s.Labels)
	validateDeadline(v, s)
	return v.orNil()
}

func validateWorkers(v *ValidationError, w WorkerRange) {
	if w.Min < 1 || w.Min > MaxWorkers {
		v.add("workers.min", "must be between 1 and %d", MaxWorkers)
	}
	if w.Max < 1 || w.Max > MaxWorkers {
		v.add("workers.max", "must be between 1 and %d", MaxWorkers)
	} else if w.Max < w.Min {
		v.add("workers.max", "must be at least workers.min (%d)", w.Min)
	}
}

func validateTrainer(v *ValidationError, t Trainer) {
	switch t.Kind {
	case TrainerBuiltin:
		if trainerSection(v, TrainerBuiltin, TrainerExec, t.Builtin != nil, t.Exec != nil) {
			validateBuiltin(v, *t.Builtin)
		}
	case TrainerExec:
		if trainerSection(v, TrainerExec, TrainerBuiltin, t.Exec != nil, t.Builtin != nil) {
			validateExec(v, *t.Exec)
		}
	case "":
		v.add("trainer.kind", "required: %q or %q", TrainerBuiltin, TrainerExec)
	default:
		v.add("trainer.kind", "must be %q or %q", TrainerBuiltin, TrainerExec)
	}
}

// trainerSection checks that a trainer of that kind has its own section
// ("trainer.<kind>", has) and not the other kind's (hasOther), and reports
// whether its own is there to be validated.
func trainerSection(v *ValidationError, kind, other TrainerKind, has, hasOther bool) bool {
	if hasOther {
		v.add("trainer."+string(other), "must be absent when kind is %q", kind)
	}
	if !has {
		v.add("trainer."+string(kind), "required when kind is %q", kind)
	}
	return has
}

func validateBuiltin(v *ValidationError, b BuiltinTrainer) {
	const p = "trainer.builtin."
	before := len(v.Fields)
	if len(b.Model.Hidden) > MaxHiddenLayers {
		v.add(p+"model.hidden", "at most %d layers", MaxHiddenLayers)
	}
	for i, w := range b.Model.Hidden {
		if w < 1 || w > MaxLayerWidth {
			v.add(fmt.Sprintf(p+"model.hidden[%d]", i), "must be between 1 and %d", MaxLayerWidth)
		}
	}
	d := b.Dataset
	if d.Samples < 1 || d.Samples > 1e9 {
		v.add(p+"dataset.samples", "must be between 1 and 1000000000")
	}
	if d.Features < 1 || d.Features > 1<<16 {
		v.add(p+"dataset.features", "must be between 1 and %d", 1<<16)
	}
	if d.Classes < 2 || d.Classes > 1<<16 {
		v.add(p+"dataset.classes", "must be between 2 and %d", 1<<16)
	}
	if d.Partitions < 1 || d.Partitions > 1e6 {
		v.add(p+"dataset.partitions", "must be between 1 and 1000000")
	} else if d.Samples >= 1 && d.Partitions > d.Samples {
		v.add(p+"dataset.partitions", "must not exceed dataset.samples (%d)", d.Samples)
	}
	if b.Epochs < 1 || b.Epochs > 1e5 {
		v.add(p+"epochs", "must be between 1 and 100000")
	}
	if b.BatchSize < 1 || b.BatchSize > 1<<20 {
		v.add(p+"batch_size", "must be between 1 and %d", 1<<20)
	}
	if !(b.LearningRate > 0 && b.LearningRate <= 100) || math.IsInf(b.LearningRate, 0) {
		v.add(p+"learning_rate", "must be greater than 0 and at most 100")
	}
	if !(b.Momentum >= 0 && b.Momentum < 1) {
		v.add(p+"momentum", "must be in [0, 1)")
	}
	switch b.BatchPolicy {
	case "", FixedGlobal, FixedLocal:
	default:
		v.add(p+"batch_policy", "must be %q or %q", FixedGlobal, FixedLocal)
	}
	if len(v.Fields) > before {
		return // the products below are only meaningful for fields in range
	}
	if n := b.Parameters(); n > MaxParameters {
		v.add(p+"model.hidden", "dataset.features (%d), model.hidden %v and dataset.classes (%d) make %d parameters; at most %d",
			d.Features, b.Model.Hidden, d.Classes, n, MaxParameters)
	}
	if n := b.BatchValues(); n > MaxBatchValues {
		v.add(p+"batch_size", "batch_size (%d) x the layer widths (dataset.features + model.hidden + dataset.classes = %d) is %d activation values per step; at most %d",
			b.BatchSize, n/int64(b.BatchSize), n, MaxBatchValues)
	}
}

// Parameters is the model's parameter count: a weight matrix and a bias
// vector per layer, from dataset.features through model.hidden to
// dataset.classes. Each width is bounded by validation, so it cannot
// overflow.
func (b BuiltinTrainer) Parameters() int64 {
	dims := b.dims()
	var n int64
	for l := 0; l+1 < len(dims); l++ {
		n += dims[l]*dims[l+1] + dims[l+1]
	}
	return n
}

// BatchValues is batch_size x the sum of the layer widths: the activations
// one step holds at world size 1.
func (b BuiltinTrainer) BatchValues() int64 {
	var width int64
	for _, d := range b.dims() {
		width += d
	}
	return int64(b.BatchSize) * width
}

func (b BuiltinTrainer) dims() []int64 {
	dims := []int64{int64(b.Dataset.Features)}
	for _, h := range b.Model.Hidden {
		dims = append(dims, int64(h))
	}
	return append(dims, int64(b.Dataset.Classes))
}

func validateExec(v *ValidationError, e ExecTrainer) {
	const p = "trainer.exec."
	if len(e.Command) == 0 || e.Command[0] == "" {
		v.add(p+"command", "required: the program and its arguments")
	}
	if len(e.Command) > MaxExecArgs {
		v.add(p+"command", "at most %d arguments", MaxExecArgs)
	}
	for i, a := range e.Command {
		if len(a) > MaxExecArgLen || strings.ContainsRune(a, 0) {
			v.add(fmt.Sprintf(p+"command[%d]", i), "must be at most %d bytes without NUL", MaxExecArgLen)
		}
	}
	if e.Image != "" {
		if reason := checkImage(e.Image); reason != "" {
			v.add(p+"image", "%s", reason)
		}
	}
	if len(e.Env) > MaxExecEnv {
		v.add(p+"env", "at most %d variables", MaxExecEnv)
	}
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		switch {
		case !envNameRE.MatchString(k):
			v.add(p+"env."+k, "name must match %s", envNameRE)
		case reservedEnv[k]:
			v.add(p+"env."+k, "reserved: set by the worker")
		case strings.HasPrefix(k, "EDL_"):
			v.add(p+"env."+k, "reserved: names starting with EDL_ are edl's own (the worker sets them)")
		case k == "NVIDIA_VISIBLE_DEVICES":
			// The device plugin's list of the allocation's GPUs, from which
			// the worker derives CUDA_VISIBLE_DEVICES: "all" would give the
			// program every GPU of the host.
			v.add(p+"env."+k, "reserved: the GPUs Nomad gave the worker (the program's CUDA_VISIBLE_DEVICES comes from it)")
		case strings.HasPrefix(k, "NOMAD_"):
			v.add(p+"env."+k, "reserved: names starting with NOMAD_ are Nomad's (the task's allocation, ports and directories)")
		case len(e.Env[k]) > MaxExecArgLen || strings.ContainsRune(e.Env[k], 0):
			v.add(p+"env."+k, "value must be at most %d bytes without NUL", MaxExecArgLen)
		}
	}
	if len(e.Workdir) > MaxWorkdirLen || strings.ContainsFunc(e.Workdir, isControl) {
		v.add(p+"workdir", "must be at most %d printable characters", MaxWorkdirLen)
	}
	if d := e.Dataset; d != nil {
		if d.Samples < 1 || d.Samples > 1e12 {
			v.add(p+"dataset.samples", "must be between 1 and 1000000000000")
		}
		if d.Partitions < 1 || d.Partitions > 1e6 {
			v.add(p+"dataset.partitions", "must be between 1 and 1000000")
		} else if d.Samples >= 1 && int64(d.Partitions) > d.Samples {
			v.add(p+"dataset.partitions", "must not exceed dataset.samples (%d)", d.Samples)
		}
	}
	switch e.Mode {
	case "", ExecRestart:
	case ExecLive:
		if e.Dataset == nil {
			v.add(p+"dataset", "required when mode is %q: edl hands out the data set's sample ranges", ExecLive)
		}
	default:
		v.add(p+"mode", "must be %q or %q", ExecRestart, ExecLive)
	}
	if g := e.GracePeriodS; g != nil && (*g < 0 || *g > MaxGracePeriodS) {
		v.add(p+"grace_period_s", "must be between 0 (SIGKILL at once) and %d seconds", MaxGracePeriodS)
	}
	if r := e.MaxRestarts; r != nil && (*r < 0 || *r > MaxExecRestarts) {
		v.add(p+"max_restarts", "must be between 0 and %d", MaxExecRestarts)
	}
	if len(e.Preload) > MaxPreload {
		v.add(p+"preload", "at most %d modules", MaxPreload)
	}
	for i, m := range e.Preload {
		if len(m) > 256 || !moduleRE.MatchString(m) {
			v.add(fmt.Sprintf(p+"preload[%d]", i), "must be a Python module name (dotted identifiers, e.g. torch.distributed), not %q", m[:min(len(m), 64)])
		}
	}
	if len(e.Preload) > 0 && e.Warm != nil && !*e.Warm {
		v.add(p+"preload", "has no effect with warm false: remove one of them")
	}
}

// MaxImageLen bounds trainer.exec.image; MaxImageNameLen its name (the
// part before ":tag" and "@digest"), as Docker bounds it.
const (
	MaxImageLen     = 512
	MaxImageNameLen = 255
)

// imageRE is Docker's image reference grammar (github.com/distribution/reference,
// ReferenceRegexp): [host[:port]/]path-component[/path-component...][:tag][@digest],
// path components lowercase letters and digits joined by '.', '_', '__' or
// dashes. Nomad puts the image into the docker driver's config, where it
// interpolates ${...} with the task's environment (the workers' Redis login,
// the operator's worker env) and node attributes: a reference has no '$',
// '{', space or leading '-', so none of that gets through.
var imageRE = func() *regexp.Regexp {
	const (
		alnum     = `[a-z0-9]+`
		separator = `(?:[._]|__|[-]+)`
		domainCmp = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		domain    = `(?:` + domainCmp + `(?:\.` + domainCmp + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
		pathCmp   = alnum + `(?:` + separator + alnum + `)*`
		name      = `(?:` + domain + `/)?` + pathCmp + `(?:/` + pathCmp + `)*`
		tag       = `[\w][\w.-]{0,127}`
		digest    = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	)
	return regexp.MustCompile(`^(` + name + `)(?::` + tag + `)?(?:@` + digest + `)?$`)
}()

// checkImage returns why image is not a container image reference the
// docker driver can pull, or "".
func checkImage(image string) string {
	const want = "must be a container image reference ([registry[:port]/]repository[:tag][@algorithm:hex], repository in lowercase)"
	switch {
	case len(image) > MaxImageLen:
		return fmt.Sprintf("at most %d characters", MaxImageLen)
	case strings.Contains(image, "${"):
		return want + "; ${...} is Nomad interpolation, not allowed"
	}
	m := imageRE.FindStringSubmatch(image)
	switch {
	case m == nil:
		return want
	case len(m[1]) > MaxImageNameLen:
		return fmt.Sprintf("repository name at most %d characters", MaxImageNameLen)
	}
	return ""
}

// MaxPreload bounds trainer.exec.preload.
const MaxPreload = 32

var moduleRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

func validateLabels(v *ValidationError, labels map[string]string) {
	if len(labels) > MaxLabels {
		v.add("labels", "at most %d labels", MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if len(k) > MaxLabelKeyLen || !labelKeyRE.MatchString(k) {
			v.add("labels."+k, "key must be 1-%d letters, digits, '.', '_', '/' or '-'", MaxLabelKeyLen)
			continue
		}
		if len(labels[k]) > MaxLabelValueLen || strings.ContainsFunc(labels[k], isControl) {
			v.add("labels."+k, "value must be at most %d printable characters", MaxLabelValueLen)
		}
	}
}

func checkCallback(raw string) string {
	if len(raw) > MaxCallbackLen {
		return fmt.Sprintf("at most %d characters", MaxCallbackLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "not a URL"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "scheme must be http or https"
	}
	if u.Host == "" {
		return "must name a host"
	}
	if u.User != nil {
		return "must not carry credentials"
	}
	return ""
}

// isControl reports C0, DEL and C1 (U+0080-U+009F: 0x9b is CSI to some
// terminals), none of them printable.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }
