package gpuenv

import (
	"strings"
)

const (
	// CUDA is the variable CUDA reads.
	CUDA = "CUDA_VISIBLE_DEVICES"
	// NVIDIA is the variable Nomad's NVIDIA device plugin sets.
	NVIDIA = "NVIDIA_VISIBLE_DEVICES"
)

// Derive returns the CUDA_VISIBLE_DEVICES a process with the environment
// lookup should get, and whether it must be set (false: leave the
// environment as it is). An explicit CUDA_VISIBLE_DEVICES always wins.
// NVIDIA_VISIBLE_DEVICES "all" leaves every GPU visible; "none", "void"
// or empty hides them all (an empty CUDA_VISIBLE_DEVICES); a list is
// passed on, spaces trimmed. Without either variable, allocGPUs (the
// allocation's device IDs, when the caller knows them) are used.
func Derive(lookup func(string) (string, bool), allocGPUs []string) (string, bool) {
	if _, ok := lookup(CUDA); ok {
		return "", false
	}
	if v, ok := lookup(NVIDIA); ok {
		v = strings.TrimSpace(v)
		switch v {
		case "all":
			return "", false
		case "", "none", "void":
			return "", true
		}
		var ids []string
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
		return strings.Join(ids, ","), true
	}
	if len(allocGPUs) > 0 {
		return strings.Join(allocGPUs, ","), true
	}
	return "", false
}

// Apply returns env (KEY=VALUE entries, as os.Environ gives them) with
// CUDA_VISIBLE_DEVICES added where Derive says so; env itself is not
// modified.
func Apply(env []string, allocGPUs []string) []string {
	lookup := func(key string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
				return v, true
			}
		}
		return "", false
	}
	v, ok := Derive(lookup, allocGPUs)
	out := append([]string(nil), env...)
	if ok {
		out = append(out, CUDA+"="+v)
	}
	return out
}
