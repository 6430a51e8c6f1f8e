package core

import (
	"sort"
	"strconv"
	"strings"
)

// ProgramEnv is what an exec-mode program's environment is made of: one
// process per worker, so torchrun's "node" is the worker and every local
// rank is 0.
type ProgramEnv struct {
	Base          []string          // the worker's own environment (KEY=VALUE)
	Spec          map[string]string // trainer.exec.env
	JobID         string
	Generation    int64
	Rank, World   int
	MasterAddr    string
	MasterPort    int
	RestartCount  int // failure restarts so far (torchrun's restart_count)
	MaxRestarts   int
	CheckpointDir string
	ErrorFile     string // TORCHELASTIC_ERROR_FILE
	MetricsFile   string // EDL_METRICS_FILE (restart/metricsfile.go); "" leaves it unset
}

// Environ returns the program's environment, sorted: the worker's own
// variables, then the spec's (but never over an EDL_ variable the worker
// has), then exactly the variables torchrun 1.13's local elastic agent sets for each worker process
// (torch/distributed/elastic/agent/server/local_elastic_agent.py,
// _start_workers, with nproc_per_node 1 and a c10d rendezvous, plus the
// TORCHELASTIC_ERROR_FILE of elastic/multiprocessing), then edl's own.
// CUDA_VISIBLE_DEVICES is the worker's GPUs (GPUVisibility).
func (e ProgramEnv) Environ() []string {
	m := map[string]string{}
	for _, kv := range e.Base {
		if k, v, ok := strings.Cut(kv, "="); ok && !workerSecretEnv(k) {
			m[k] = v
		}
	}
	for k, v := range e.Spec {
		// The worker's own EDL_ and NOMAD_ variables and its
		// NVIDIA_VISIBLE_DEVICES (the allocation's GPUs) win (submission
		// refuses them; a spec stored before that may still have one).
		if _, own := m[k]; own && workerOwnEnv(k) {
			continue
		}
		m[k] = v
	}
	if cvd, ok := GPUVisibility(m); ok {
		m["CUDA_VISIBLE_DEVICES"] = cvd
	} else {
		delete(m, "CUDA_VISIBLE_DEVICES")
	}
	rank, world := strconv.Itoa(e.Rank), strconv.Itoa(e.World)
	for k, v := range map[string]string{
		"LOCAL_RANK":                   "0",
		"RANK":                         rank,
		"GROUP_RANK":                   rank,
		"ROLE_RANK":                    rank,
		"ROLE_NAME":                    "default",
		"LOCAL_WORLD_SIZE":             "1",
		"WORLD_SIZE":                   world,
		"GROUP_WORLD_SIZE":             world,
		"ROLE_WORLD_SIZE":              world,
		"MASTER_ADDR":                  e.MasterAddr,
		"MASTER_PORT":                  strconv.Itoa(e.MasterPort),
		"TORCHELASTIC_RESTART_COUNT":   strconv.Itoa(e.RestartCount),
		"TORCHELASTIC_MAX_RESTARTS":    strconv.Itoa(e.MaxRestarts),
		"TORCHELASTIC_RUN_ID":          e.JobID,
		"TORCHELASTIC_USE_AGENT_STORE": "False",
		"EDL_JOB_ID":                   e.JobID,
		"EDL_GENERATION":               strconv.FormatInt(e.Generation, 10),
		"EDL_CHECKPOINT_DIR":           e.CheckpointDir,
	} {
		m[k] = v
	}
	if _, ok := m["NCCL_ASYNC_ERROR_HANDLING"]; !ok {
		m["NCCL_ASYNC_ERROR_HANDLING"] = "1" // torchrun's default
	}
	if e.MetricsFile != "" {
		m["EDL_METRICS_FILE"] = e.MetricsFile
	}
	if e.ErrorFile != "" {
		m["TORCHELASTIC_ERROR_FILE"] = e.ErrorFile
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// generationEnv are the variables of Environ that change from one
// generation to the next.
var generationEnv = map[string]bool{"RANK": true, "GROUP_RANK": true, "ROLE_RANK": true,
	"WORLD_SIZE": true, "GROUP_WORLD_SIZE": true, "ROLE_WORLD_SIZE": true, "MASTER_ADDR": true,
	"MASTER_PORT": true, "TORCHELASTIC_RESTART_COUNT": true, "EDL_GENERATION": true}

// BaseEnviron is Environ less the variables a generation sets (rank,
// world, rendezvous, restart count, generation): the environment a warm
// interpreter starts in before it knows the generation it will run in.
func (e ProgramEnv) BaseEnviron() []string {
	var out []string
	for _, kv := range e.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !generationEnv[k] {
			out = append(out, kv)
		}
	}
	return out
}

// workerOwnEnv reports whether a variable the worker has is one a spec's
// env may not replace: edl's (EDL_), Nomad's (NOMAD_) and the GPUs the
// device plugin gave the allocation, from which CUDA_VISIBLE_DEVICES is
// derived.
func workerOwnEnv(k string) bool {
	return strings.HasPrefix(k, "EDL_") || strings.HasPrefix(k, "NOMAD_") || k == "NVIDIA_VISIBLE_DEVICES"
}

// workerSecretEnv reports whether a variable of the worker's own
// environment is a credential of edl's, which its program must not
// inherit: the Redis login, the Nomad token, the checkpoint store's AWS
// keys (the program's checkpoints go through the worker; a program that
// needs keys of its own gets them from trainer.exec.env).
func workerSecretEnv(k string) bool {
	switch k {
	case "EDL_NOMAD_TOKEN", "NOMAD_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN":
		return true
	}
	return strings.HasPrefix(k, "EDL_REDIS_")
}

// GPUVisibility is the CUDA_VISIBLE_DEVICES a program gets: the worker's
// own when set (edl dev's local cluster sets it, "" for a CPU worker),
// else derived from NVIDIA_VISIBLE_DEVICES (Nomad's NVIDIA device plugin:
// device UUIDs, which CUDA accepts; "void" or "none" hide every GPU; "all"
// leaves the choice to CUDA). ok is false when the variable must stay unset.
func GPUVisibility(env map[string]string) (value string, ok bool) {
	if v, set := env["CUDA_VISIBLE_DEVICES"]; set {
		return v, true
	}
	nv, set := env["NVIDIA_VISIBLE_DEVICES"]
	switch {
	case !set || nv == "all":
		return "", false
	case nv == "void" || nv == "none" || nv == "":
		return "", true
	}
	return nv, true
}
