package api

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/edl-nomad/edl/jobs"
)

// ExecPolicy decides at submit time whether a job with trainer.kind "exec"
// may run: exec runs a tenant's own program on the cluster, so the operator
// must allow it. It returns nil to accept the spec or a
// *jobs.ValidationError naming the field at fault (answered 422). The API
// calls it only for exec specs; Config.ExecPolicy nil accepts them (an
// embedder's choice: edl serve and edl dev always set one).
type ExecPolicy func(spec jobs.Spec) error

// ExecRunner is where an exec job's program would run, which decides what
// the operator must have allowed.
type ExecRunner string

const (
	// RunLocal is edl dev: the program runs as the local user who started it.
	RunLocal ExecRunner = "local"
	// RunDocker is Nomad's docker driver: the program runs in the job's
	// trainer.exec.image, which must match an allowed pattern.
	RunDocker ExecRunner = "docker"
	// RunHost is Nomad's raw_exec (as the Nomad client's user, usually
	// root) or exec (chroot, no image) driver: the program runs on the
	// client host itself.
	RunHost ExecRunner = "host"
)

// ExecRules is the operator's exec configuration (edl serve's
// --exec-images and --allow-raw-exec).
type ExecRules struct {
	Runner ExecRunner
	// Images are glob patterns (path.Match: '*' does not cross '/') an
	// image must match under RunDocker, e.g. "registry.internal/ml/*".
	// Empty: exec jobs are refused on docker.
	Images []string
	// DefaultImage is the image a job without trainer.exec.image runs in
	// (the task's configured image); it is checked like a job's own.
	DefaultImage string
	// AllowHost allows exec jobs under RunHost.
	AllowHost bool
}

// CheckImagePatterns reports the first malformed glob pattern.
func CheckImagePatterns(patterns []string) error {
	for _, p := range patterns {
		if strings.TrimSpace(p) == "" {
			return errors.New("empty image pattern")
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("image pattern %q: %w", p, err)
		}
	}
	return nil
}

// NewExecPolicy returns the policy for rules; it fails on a malformed
// image pattern or an unknown runner.
func NewExecPolicy(r ExecRules) (ExecPolicy, error) {
	if err := CheckImagePatterns(r.Images); err != nil {
		return nil, err
	}
	switch r.Runner {
	case RunLocal, RunDocker, RunHost:
	default:
		return nil, fmt.Errorf("exec policy: runner %q is not local, docker or host", r.Runner)
	}
	images := append([]string(nil), r.Images...)
	return func(spec jobs.Spec) error {
		if spec.Trainer.Kind != jobs.TrainerExec || spec.Trainer.Exec == nil {
			return nil
		}
		return r.decide(images, *spec.Trainer.Exec)
	}, nil
}

// decide is the pure rule: nil or a ValidationError with one field.
func (r ExecRules) decide(images []string, ex jobs.ExecTrainer) error {
	switch r.Runner {
	case RunLocal:
		return nil
	case RunHost:
		if !r.AllowHost {
			return jobs.Invalid("trainer.kind", `"exec" jobs are not allowed on this cluster: its Nomad driver runs programs on the client host (raw_exec/exec) and the operator did not start edl serve with --allow-raw-exec`)
		}
		if ex.Image != "" {
			return jobs.Invalid("trainer.exec.image", "this cluster runs programs on the client host (raw_exec/exec), not in containers: leave image empty")
		}
		return nil
	}
	// RunDocker
	if len(images) == 0 {
		return jobs.Invalid("trainer.exec.image", `"exec" jobs are not allowed on this cluster: the operator allowed no images (edl serve --exec-images)`)
	}
	img, own := ex.Image, true
	if img == "" {
		img, own = r.DefaultImage, false
	}
	for _, p := range images {
		if ok, _ := path.Match(p, img); ok {
			return nil
		}
	}
	if !own {
		return jobs.Invalid("trainer.exec.image", fmt.Sprintf("required: the default image %q is not among the allowed images (%s)", img, strings.Join(images, ", ")))
	}
	return jobs.Invalid("trainer.exec.image", fmt.Sprintf("%q is not allowed on this cluster; allowed: %s", img, strings.Join(images, ", ")))
}

// decodeSpec is jobs.DecodeSpec followed by the exec policy. When the spec
// is otherwise invalid the policy still runs on it as decoded, so that the
// 422 lists every field at fault, as validation does.
func (s *Server) decodeSpec(body []byte) (jobs.Spec, error) {
	spec, err := jobs.DecodeSpec(body)
	if s.cfg.ExecPolicy == nil {
		return spec, err
	}
	var ve *jobs.ValidationError
	if err != nil {
		if !errors.As(err, &ve) {
			return spec, err
		}
		var raw jobs.Spec
		if jobs.DecodeStrict(body, &raw) != nil {
			return spec, err
		}
		spec = raw.WithDefaults()
	}
	if spec.Trainer.Kind != jobs.TrainerExec {
		return spec, err
	}
	perr := s.cfg.ExecPolicy(spec)
	var pe *jobs.ValidationError
	switch {
	case perr == nil:
		return spec, err
	case ve == nil:
		return spec, perr
	case errors.As(perr, &pe):
		merged := &jobs.ValidationError{Fields: append(append([]jobs.FieldError(nil), ve.Fields...), pe.Fields...)}
		return spec, merged
	}
	return spec, errors.Join(err, perr)
}
