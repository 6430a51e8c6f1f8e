package gpuenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestApply(t *testing.T) {
	cases := []struct {
		name  string
		env   []string
		alloc []string
		want  []string
	}{
		{"plugin UUIDs become CUDA's", []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-1a, GPU-2b"}, nil,
			[]string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-1a, GPU-2b", "CUDA_VISIBLE_DEVICES=GPU-1a,GPU-2b"}},
		{"explicit CUDA wins", []string{"NVIDIA_VISIBLE_DEVICES=GPU-1a", "CUDA_VISIBLE_DEVICES=0"}, []string{"GPU-9"},
			[]string{"NVIDIA_VISIBLE_DEVICES=GPU-1a", "CUDA_VISIBLE_DEVICES=0"}},
		{"explicit empty CUDA wins", []string{"CUDA_VISIBLE_DEVICES="}, []string{"GPU-9"}, []string{"CUDA_VISIBLE_DEVICES="}},
		{"all leaves every GPU", []string{"NVIDIA_VISIBLE_DEVICES=all"}, nil, []string{"NVIDIA_VISIBLE_DEVICES=all"}},
		{"void hides them", []string{"NVIDIA_VISIBLE_DEVICES=void"}, nil, []string{"NVIDIA_VISIBLE_DEVICES=void", "CUDA_VISIBLE_DEVICES="}},
		{"none hides them", []string{"NVIDIA_VISIBLE_DEVICES=none"}, nil, []string{"NVIDIA_VISIBLE_DEVICES=none", "CUDA_VISIBLE_DEVICES="}},
		{"allocation's devices without the plugin variable", []string{"A=1"}, []string{"GPU-3", "GPU-4"},
			[]string{"A=1", "CUDA_VISIBLE_DEVICES=GPU-3,GPU-4"}},
		{"nothing known: unchanged", []string{"A=1"}, nil, []string{"A=1"}},
		{"last entry wins", []string{"NVIDIA_VISIBLE_DEVICES=GPU-1", "NVIDIA_VISIBLE_DEVICES=GPU-2"}, nil,
			[]string{"NVIDIA_VISIBLE_DEVICES=GPU-1", "NVIDIA_VISIBLE_DEVICES=GPU-2", "CUDA_VISIBLE_DEVICES=GPU-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]string(nil), tc.env...)
			if d := cmp.Diff(tc.want, Apply(in, tc.alloc)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if !cmp.Equal(in, tc.env) {
				t.Errorf("input modified: %v", in)
			}
		})
	}
}
