package core

import (
	"strings"
	"testing"
)

func envMap(kvs []string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestProgramEnviron(t *testing.T) {
	e := ProgramEnv{
		Base:  []string{"PATH=/usr/bin", "RANK=9", "OMP_NUM_THREADS=4", "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b"},
		Spec:  map[string]string{"FOO": "bar", "OMP_NUM_THREADS": "1"},
		JobID: "j-1", Generation: 7, Rank: 2, World: 3, MasterAddr: "10.0.0.5", MasterPort: 29500,
		RestartCount: 1, MaxRestarts: 3, CheckpointDir: "/w/checkpoint", ErrorFile: "/w/error.json",
	}
	got := envMap(e.Environ())
	want := map[string]string{
		"PATH": "/usr/bin", "FOO": "bar", "OMP_NUM_THREADS": "1",
		"LOCAL_RANK": "0", "RANK": "2", "GROUP_RANK": "2", "ROLE_RANK": "2", "ROLE_NAME": "default",
		"LOCAL_WORLD_SIZE": "1", "WORLD_SIZE": "3", "GROUP_WORLD_SIZE": "3", "ROLE_WORLD_SIZE": "3",
		"MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500",
		"TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_MAX_RESTARTS": "3", "TORCHELASTIC_RUN_ID": "j-1",
		"TORCHELASTIC_USE_AGENT_STORE": "False", "TORCHELASTIC_ERROR_FILE": "/w/error.json",
		"NCCL_ASYNC_ERROR_HANDLING": "1",
		"EDL_JOB_ID":                "j-1", "EDL_GENERATION": "7", "EDL_CHECKPOINT_DIR": "/w/checkpoint",
		"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d variables, want %d: %v", len(got), len(want), got)
	}
}

func TestGPUVisibility(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		want   string
		wantOK bool
	}{
		{"local sets it", map[string]string{"CUDA_VISIBLE_DEVICES": "GPU-1", "NVIDIA_VISIBLE_DEVICES": "GPU-2"}, "GPU-1", true},
		{"local CPU worker", map[string]string{"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}, "", true},
		{"nomad device plugin", map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1,GPU-2"}, "GPU-1,GPU-2", true},
		{"nomad no gpu", map[string]string{"NVIDIA_VISIBLE_DEVICES": "void"}, "", true},
		{"none", map[string]string{"NVIDIA_VISIBLE_DEVICES": "none"}, "", true},
		{"all", map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"}, "", false},
		{"nothing", map[string]string{}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := GPUVisibility(tc.env)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("GPUVisibility(%v) = %q, %v; want %q, %v", tc.env, got, ok, tc.want, tc.wantOK)
			}
		})
	}
	// Unset stays unset in the program's environment.
	if _, set := envMap(ProgramEnv{Base: []string{"NVIDIA_VISIBLE_DEVICES=all"}}.Environ())["CUDA_VISIBLE_DEVICES"]; set {
		t.Error("CUDA_VISIBLE_DEVICES set although NVIDIA_VISIBLE_DEVICES=all")
	}
}

// TestProgramEnvironDropsWorkerSecrets: the worker's Redis login, Nomad
// token and store keys stay out of the program's environment; the spec
// may still give the program keys of its own.
func TestProgramEnvironDropsWorkerSecrets(t *testing.T) {
	e := ProgramEnv{
		Base: []string{"PATH=/usr/bin", "EDL_REDIS_USER=edl-job-j1", "EDL_REDIS_PASSWORD=pw", "EDL_REDIS_PASSWORD_FILE=/x",
			"EDL_NOMAD_TOKEN=nt", "NOMAD_TOKEN=nt", "AWS_ACCESS_KEY_ID=AK", "AWS_SECRET_ACCESS_KEY=SK", "AWS_SESSION_TOKEN=ST", "AWS_REGION=eu-west-1"},
		Spec: map[string]string{"AWS_ACCESS_KEY_ID": "tenant-AK"},
	}
	got := envMap(e.Environ())
	for _, k := range []string{"EDL_REDIS_USER", "EDL_REDIS_PASSWORD", "EDL_REDIS_PASSWORD_FILE", "EDL_NOMAD_TOKEN", "NOMAD_TOKEN",
		"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		if v, ok := got[k]; ok {
			t.Errorf("program sees %s=%q", k, v)
		}
	}
	if got["AWS_ACCESS_KEY_ID"] != "tenant-AK" || got["AWS_REGION"] != "eu-west-1" || got["PATH"] != "/usr/bin" {
		t.Errorf("program env %v: want the spec's key, the region and PATH", got)
	}
}

// A spec's env overrode variables the worker sets itself
// (EDL_WORKER_INDEX from the cluster): the worker's own win now, even for
// a spec stored before such names were refused at submission.
func TestProgramEnvironWorkerValuesWin(t *testing.T) {
	e := ProgramEnv{
		Base:  []string{"EDL_WORKER_INDEX=2", "PATH=/usr/bin"},
		Spec:  map[string]string{"EDL_WORKER_INDEX": "0", "EDL_JOB_ID": "other", "EDL_TEST_FLAG": "1", "FOO": "bar"},
		JobID: "j-1", Rank: 0, World: 1,
	}
	got := envMap(e.Environ())
	for k, v := range map[string]string{"EDL_WORKER_INDEX": "2", "EDL_JOB_ID": "j-1", "EDL_TEST_FLAG": "1", "FOO": "bar"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// A warm interpreter's environment is the generation's less what a
// generation sets: the same job variables, no rank, world or rendezvous.
func TestProgramBaseEnviron(t *testing.T) {
	e := ProgramEnv{Base: []string{"PATH=/usr/bin", "RANK=9"}, Spec: map[string]string{"OMP_NUM_THREADS": "1"},
		JobID: "j-1", Generation: 7, Rank: 2, World: 3, MasterAddr: "10.0.0.5", MasterPort: 29500,
		RestartCount: 1, MaxRestarts: 3, CheckpointDir: "/w/checkpoint"}
	full, base := envMap(e.Environ()), envMap(e.BaseEnviron())
	for k, v := range full {
		_, kept := base[k]
		if gen := generationEnv[k]; gen == kept || kept && base[k] != v {
			t.Errorf("%s: base has %q (kept %v), generation %q", k, base[k], kept, v)
		}
	}
	for _, k := range []string{"RANK", "WORLD_SIZE", "MASTER_PORT", "EDL_GENERATION"} {
		if _, ok := base[k]; ok {
			t.Errorf("base environment has %s", k)
		}
	}
	if base["OMP_NUM_THREADS"] != "1" || base["EDL_JOB_ID"] != "j-1" || base["LOCAL_RANK"] != "0" {
		t.Errorf("base environment lost the job's variables: %v", base)
	}
}

// A spec stored before NVIDIA_VISIBLE_DEVICES and NOMAD_* were refused at
// submission replaced the worker's: NVIDIA_VISIBLE_DEVICES=all left
// CUDA_VISIBLE_DEVICES unset, so the program saw every GPU of the host.
// The worker's own values win now.
func TestProgramEnvironNomadValuesWin(t *testing.T) {
	e := ProgramEnv{
		Base:  []string{"NVIDIA_VISIBLE_DEVICES=GPU-1", "NOMAD_ALLOC_DIR=/alloc", "PATH=/usr/bin"},
		Spec:  map[string]string{"NVIDIA_VISIBLE_DEVICES": "all", "NOMAD_ALLOC_DIR": "/elsewhere", "NOMAD_EXTRA": "1"},
		JobID: "j-1", Rank: 0, World: 1,
	}
	got := envMap(e.Environ())
	for k, v := range map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1", "CUDA_VISIBLE_DEVICES": "GPU-1", "NOMAD_ALLOC_DIR": "/alloc", "NOMAD_EXTRA": "1"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
