package nomadx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/nomadx"
	"github.com/edl-nomad/edl/nomadx/nomadtest"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

func execJob(id, image string) jobs.Job {
	return jobs.Job{ID: id, Tenant: "team-a", Spec: jobs.Spec{
		Name: id, Workers: jobs.WorkerRange{Min: 1, Max: 3},
		Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{Command: []string{"python3", "train.py"}, Image: image}},
	}}
}

// registered scales job to 2 through nomadx against nomadtest and returns
// the job as the fake Nomad stored it (after its JSON round trip).
func registered(t *testing.T, mut func(*nomadx.Config), job jobs.Job) *api.Job {
	t.Helper()
	e := newEnv(t, nomadtest.Config{}, mut)
	if err := e.c.Scale(context.Background(), job, 2, "initial"); err != nil {
		t.Fatal(err)
	}
	nj := e.srv.Job("default", e.cfg.NomadJobID(job.ID))
	if nj == nil {
		t.Fatal("job not registered")
	}
	waitAllocs(t, e, job.ID, 2) // Nomad placed the workers
	return nj
}

var workerArgs = []any{"worker", "--job", "j1", "--redis", "redis://10.0.0.5:6379/0", "--store", "s3://ckpt/edl",
	"--advertise", "${NOMAD_IP_master}", "--master-port", "${NOMAD_PORT_master}", "--exec-dir", "${NOMAD_ALLOC_DIR}/edl-exec"}

func checkExecCommon(t *testing.T, nj *api.Job) *api.Task {
	t.Helper()
	tg := nj.TaskGroups[0]
	if len(tg.Networks) != 1 || len(tg.Networks[0].DynamicPorts) != 1 || tg.Networks[0].DynamicPorts[0].Label != "master" {
		t.Errorf("group network %+v, want one dynamic port \"master\"", tg.Networks)
	}
	task := tg.Tasks[0]
	for _, k := range []string{"EDL_MASTER_PORT", "EDL_CHECKPOINT_DIR"} {
		if _, ok := task.Env[k]; ok {
			t.Errorf("task env sets %s: the worker's flags carry it", k)
		}
	}
	if task.KillTimeout == nil || *task.KillTimeout < 45*time.Second {
		t.Errorf("kill_timeout %v, want the 30 s grace period plus a margin", task.KillTimeout)
	}
	if task.KillSignal != "SIGTERM" {
		t.Errorf("kill_signal %q", task.KillSignal)
	}
	return task
}

func TestExecTemplateDockerImageWithEdl(t *testing.T) {
	nj := registered(t, func(c *nomadx.Config) {
		c.Driver, c.Image = nomadx.DriverDocker, "ghcr.io/edl-nomad/edl:1"
	}, execJob("j1", "registry.internal/ml/train:3"))
	task := checkExecCommon(t, nj)
	want := map[string]any{"image": "registry.internal/ml/train:3", "entrypoint": []any{"/usr/local/bin/edl"},
		"args": workerArgs, "network_mode": "host"}
	if d := cmp.Diff(want, task.Config); d != "" {
		t.Errorf("docker config (-want +got):\n%s", d)
	}
	if len(task.Artifacts) != 0 {
		t.Errorf("artifacts %+v, want none (edl is in the image)", task.Artifacts)
	}
}

func TestExecTemplateDockerArtifact(t *testing.T) {
	nj := registered(t, func(c *nomadx.Config) {
		c.Driver, c.Image = nomadx.DriverDocker, "ghcr.io/edl-nomad/edl:1"
		c.Exec = nomadx.ExecConfig{ArtifactURL: "https://files.internal/edl/edl-linux-amd64.tar.gz", ArtifactChecksum: "sha256:abcd"}
	}, execJob("j1", "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime"))
	task := checkExecCommon(t, nj)
	if task.Config["image"] != "pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime" {
		t.Errorf("image %v", task.Config["image"])
	}
	if d := cmp.Diff([]any{"/local/edl-bin/edl"}, task.Config["entrypoint"]); d != "" {
		t.Errorf("entrypoint (-want +got):\n%s", d)
	}
	if len(task.Artifacts) != 1 {
		t.Fatalf("artifacts %+v, want one", task.Artifacts)
	}
	a := task.Artifacts[0]
	if *a.GetterSource != "https://files.internal/edl/edl-linux-amd64.tar.gz" || *a.RelativeDest != "local/edl-bin/" || a.GetterOptions["checksum"] != "sha256:abcd" {
		t.Errorf("artifact %+v dest %q options %v", *a.GetterSource, *a.RelativeDest, a.GetterOptions)
	}
}

func TestExecTemplateRawExec(t *testing.T) {
	for _, tc := range []struct {
		name, artifact, command string
	}{
		{"edl on the host", "", "/usr/local/bin/edl"},
		{"artifact", "https://files.internal/edl.zip", "local/edl-bin/edl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nj := registered(t, func(c *nomadx.Config) {
				c.Driver = nomadx.DriverRawExec
				c.Exec.ArtifactURL = tc.artifact
			}, execJob("j1", ""))
			task := checkExecCommon(t, nj)
			if task.Driver != "raw_exec" {
				t.Errorf("driver %s", task.Driver)
			}
			want := map[string]any{"command": tc.command, "args": workerArgs}
			if d := cmp.Diff(want, task.Config); d != "" {
				t.Errorf("raw_exec config (-want +got):\n%s", d)
			}
			if (tc.artifact != "") != (len(task.Artifacts) == 1) {
				t.Errorf("artifacts %+v", task.Artifacts)
			}
		})
	}
}

func TestBuiltinTemplateHasNoExecParts(t *testing.T) {
	nj := registered(t, nil, gpuJob("j1", 0, nil))
	tg := nj.TaskGroups[0]
	if len(tg.Networks) != 0 || len(tg.Tasks[0].Artifacts) != 0 || len(tg.Tasks[0].Config["args"].([]any)) != 7 {
		t.Errorf("builtin job got exec parts: networks %+v config %v", tg.Networks, tg.Tasks[0].Config)
	}
}

func TestExecConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		exec  nomadx.ExecConfig
		field string
	}{
		{nomadx.ExecConfig{ArtifactURL: "https://files.internal/edl"}, "exec.artifact_url"},
		{nomadx.ExecConfig{ArtifactURL: "ftp://files.internal/edl.tgz"}, "exec.artifact_url"},
		{nomadx.ExecConfig{ArtifactChecksum: "sha256:ab"}, "exec.artifact_checksum"},
		{nomadx.ExecConfig{ArtifactURL: "https://f/edl.tgz", ArtifactChecksum: "crc:1"}, "exec.artifact_checksum"},
		{nomadx.ExecConfig{Binary: "bin/edl"}, "exec.binary"},
	} {
		cfg := testConfig("http://127.0.0.1:4646")
		cfg.Exec = tc.exec
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: err %v, want one naming %s", tc.exec, err, tc.field)
		}
	}
	cfg := testConfig("http://127.0.0.1:4646")
	cfg.Exec = nomadx.ExecConfig{ArtifactURL: "https://files.internal/edl.tar.gz?archive=tar.gz", ArtifactChecksum: "sha256:ab", Binary: "/opt/edl"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("good exec config refused: %v", err)
	}
}

// --nomad-addr ftp://x and --nomad-job-prefix bad/prefix were taken at
// start and failed at every planner round after (an unsupported scheme; a
// job ID that splits the API's path); both are refused by name now.
func TestConfigRefusesAddressAndPrefix(t *testing.T) {
	for _, tc := range []struct{ addr, prefix, field string }{
		{"ftp://x", "edl-", "address"},
		{"127.0.0.1:4646", "edl-", "address"},
		{"http://", "edl-", "address"},
		{"http://127.0.0.1:4646", "bad/prefix", "job_prefix"},
		{"http://127.0.0.1:4646", "sp ace", "job_prefix"},
		{"http://127.0.0.1:4646", "", "job_prefix"},
	} {
		cfg := testConfig(tc.addr)
		cfg.JobPrefix = tc.prefix
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("address %q, prefix %q: %v, want an error naming %s", tc.addr, tc.prefix, err, tc.field)
		}
	}
	for _, addr := range []string{"http://127.0.0.1:4646", "https://nomad.internal:4646", "unix:///var/run/nomad.sock"} {
		if err := testConfig(addr).Validate(); err != nil {
			t.Errorf("address %q refused: %v", addr, err)
		}
	}
}
