package builtin

import (
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

func TestPlanBatch(t *testing.T) {
	for _, tc := range []struct {
		policy         jobs.BatchPolicy
		initial, world int
		rank           int
		wantLocal      int
		wantLR         float32
	}{
		{jobs.FixedGlobal, 2, 2, 0, 12, 0.1},
		{jobs.FixedGlobal, 2, 5, 0, 5, 0.1}, // 24 = 5+5+5+5+4
		{jobs.FixedGlobal, 2, 5, 4, 4, 0.1},
		{jobs.FixedLocal, 2, 2, 1, 12, 0.1},
		{jobs.FixedLocal, 2, 3, 1, 12, 0.15}, // lr * world/initial
		{jobs.FixedLocal, 2, 1, 0, 12, 0.05},
	} {
		bt := &jobs.BuiltinTrainer{BatchSize: 24, LearningRate: 0.1, BatchPolicy: tc.policy}
		p := planBatch(bt, tc.initial, tc.world, tc.rank)
		if p.local != tc.wantLocal || p.lr < tc.wantLR*0.9999 || p.lr > tc.wantLR*1.0001 {
			t.Errorf("%s initial %d world %d rank %d: local %d lr %g, want %d %g", tc.policy, tc.initial, tc.world, tc.rank, p.local, p.lr, tc.wantLocal, tc.wantLR)
		}
	}
}
