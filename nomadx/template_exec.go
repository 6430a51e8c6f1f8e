package nomadx

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/hashicorp/nomad/api"
)

// Exec mode on Nomad (trainer.kind "exec"): the task runs `edl worker`,
// which starts the user's program with torchrun's environment. The group
// reserves a port "master" for rank 0's MASTER_PORT.
const (
	// MasterPortLabel is the group network port: Nomad gives the task
	// NOMAD_PORT_master and NOMAD_IP_master.
	MasterPortLabel = "master"
	// ExecDir is the worker's folder (`edl worker --exec-dir`): the
	// program's EDL_CHECKPOINT_DIR is <ExecDir>/checkpoint, which the worker
	// syncs with the checkpoint store (--store). In the allocation
	// directory, it outlives an in-place task restart.
	ExecDir = "${NOMAD_ALLOC_DIR}/edl-exec"
	// artifactDir is where an artifact archive is unpacked, relative to
	// the task directory (docker mounts the task's local/ at /local).
	artifactDir = "local/edl-bin"
	// DefaultExecBinary is where the user's image is expected to hold edl
	// when no artifact is configured: where edl's own image has it, so
	// `COPY --from=<edl image> /usr/local/bin/edl /usr/local/bin/edl` puts
	// it there.
	DefaultExecBinary = "/usr/local/bin/edl"
	// execKillMargin is added to the program's grace period for the task's
	// kill_timeout: the worker needs time after the program exits to upload
	// its checkpoint and hand back its place.
	execKillMargin = 15 * time.Second
)

// ExecConfig says how exec-mode tasks get the edl binary.
type ExecConfig struct {
	// ArtifactURL, when set, is an archive (.tar.gz, .tgz, .zip, ...) the
	// operator serves with the edl binary "edl" at its root; Nomad fetches
	// it into the task directory (artifact block) and the task runs it from
	// there, so any image (or a raw_exec host without edl) works.
	ArtifactURL string
	// ArtifactChecksum is go-getter's checksum option, e.g. "sha256:<hex>".
	ArtifactChecksum string
	// Binary is edl's path inside the user's image when there is no
	// artifact (docker); default DefaultExecBinary.
	Binary string
}

var archiveExts = []string{".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst", ".zip", ".tar"}

// Validate names the field at fault.
func (e ExecConfig) Validate() error {
	var errs []error
	if e.ArtifactURL != "" {
		u, err := url.Parse(e.ArtifactURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "s3" && u.Scheme != "gcs"):
			errs = append(errs, fmt.Errorf("nomad config: exec.artifact_url: %q: want an http(s), s3 or gcs URL", e.ArtifactURL))
		case !isArchive(u):
			errs = append(errs, fmt.Errorf("nomad config: exec.artifact_url: %q: must be an archive (%s) holding the edl binary: a plain download loses its executable bit", e.ArtifactURL, strings.Join(archiveExts, ", ")))
		}
	}
	if e.ArtifactChecksum != "" {
		kind, sum, ok := strings.Cut(e.ArtifactChecksum, ":")
		if !ok || sum == "" || (kind != "md5" && kind != "sha1" && kind != "sha256" && kind != "sha512") {
			errs = append(errs, fmt.Errorf("nomad config: exec.artifact_checksum: %q: want TYPE:HEX with TYPE md5, sha1, sha256 or sha512", e.ArtifactChecksum))
		}
		if e.ArtifactURL == "" {
			errs = append(errs, errors.New("nomad config: exec.artifact_checksum: set without exec.artifact_url"))
		}
	}
	if e.Binary != "" && !path.IsAbs(e.Binary) {
		errs = append(errs, fmt.Errorf("nomad config: exec.binary: %q: must be an absolute path in the image", e.Binary))
	}
	return errors.Join(errs...)
}

func isArchive(u *url.URL) bool {
	if u.Query().Get("archive") != "" {
		return true
	}
	p := strings.ToLower(u.Path)
	for _, ext := range archiveExts {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// execTemplate turns the task of JobTemplate into an exec-mode task:
//
//   - group network { port "master" {} }; `edl worker` gets
//     --advertise ${NOMAD_IP_master} (the host the other ranks dial, rank 0's
//     MASTER_ADDR), --master-port ${NOMAD_PORT_master} (MASTER_PORT) and
//     --exec-dir ${NOMAD_ALLOC_DIR}/edl-exec (EDL_CHECKPOINT_DIR is its
//     checkpoint/ folder, synced with --store);
//   - the edl binary comes from cfg.Exec.ArtifactURL (an artifact block,
//     unpacked to local/edl-bin) or, on docker, from the user's image at
//     cfg.Exec.Binary; on raw_exec/exec without an artifact, cfg.Command;
//   - docker: the job's trainer.exec.image (else cfg.Image) with network_mode
//     "host": gloo and NCCL connect ranks on ports of their own choosing
//     besides MASTER_PORT, which a bridge network would not let through;
//   - kill_timeout covers the program's grace period plus execKillMargin.
func execTemplate(cfg Config, job jobs.Job, tg *api.TaskGroup, task *api.Task) {
	ex := job.Spec.Trainer.Exec
	tg.Networks = []*api.NetworkResource{{DynamicPorts: []api.Port{{Label: MasterPortLabel}}}}
	if g := execGrace(ex) + execKillMargin; task.KillTimeout == nil || *task.KillTimeout < g {
		task.KillTimeout = ptr(g)
	}
	args := append(cfg.workerArgs(job.ID),
		"--advertise", "${NOMAD_IP_"+MasterPortLabel+"}",
		"--master-port", "${NOMAD_PORT_"+MasterPortLabel+"}",
		"--exec-dir", ExecDir)
	var binary string
	if cfg.Exec.ArtifactURL != "" {
		art := &api.TaskArtifact{GetterSource: ptr(cfg.Exec.ArtifactURL), RelativeDest: ptr(artifactDir + "/")}
		if cfg.Exec.ArtifactChecksum != "" {
			art.GetterOptions = map[string]string{"checksum": cfg.Exec.ArtifactChecksum}
		}
		task.Artifacts = []*api.TaskArtifact{art}
		binary = artifactDir + "/edl"
	}
	switch cfg.Driver {
	case DriverDocker:
		image := cfg.Image
		if ex != nil && ex.Image != "" {
			image = ex.Image
		}
		switch {
		case binary != "":
			binary = "/" + binary // the task's local/ is mounted at /local
		case cfg.Exec.Binary != "":
			binary = cfg.Exec.Binary
		default:
			binary = DefaultExecBinary
		}
		// `edl worker` is the process the image runs, whatever its
		// entrypoint: the command replaces it.
		task.Config = map[string]any{"image": image, "entrypoint": []string{binary}, "args": args, "network_mode": "host"}
	default: // raw_exec, exec: the program runs on the client host
		if binary == "" {
			binary = cfg.Command
		}
		task.Config = map[string]any{"command": binary, "args": args}
	}
}

// execGrace is the spec's trainer.exec.grace_period_s (default 30 s), read
// by its JSON name.
func execGrace(ex *jobs.ExecTrainer) time.Duration {
	const def = 30 * time.Second
	if ex == nil {
		return def
	}
	b, err := json.Marshal(ex)
	if err != nil {
		return def
	}
	var v struct {
		Grace *float64 `json:"grace_period_s"`
	}
	if json.Unmarshal(b, &v) != nil || v.Grace == nil || *v.Grace <= 0 {
		return def
	}
	return time.Duration(*v.Grace * float64(time.Second))
}
