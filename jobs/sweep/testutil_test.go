package sweep

import (
	"encoding/json"
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

func f(x float64) *float64 { return &x }

// builtinSpec is a valid sweep of the built-in MLP over lr and width.
func builtinSpec() Spec {
	return Spec{
		Name: "mlp",
		Template: jobs.Spec{Name: "t", Workers: jobs.WorkerRange{Min: 1, Max: 4},
			Trainer: jobs.Trainer{Kind: jobs.TrainerBuiltin, Builtin: &jobs.BuiltinTrainer{
				Model:   jobs.MLPModel{Hidden: []int{32}},
				Dataset: jobs.SyntheticDataset{Seed: 1, Samples: 4096, Features: 16, Classes: 4, Partitions: 16},
				Epochs:  1, BatchSize: 64, LearningRate: 0.1, Momentum: 0.9,
			}}},
		Parameters: map[string]Parameter{
			"trainer.builtin.lr":             {Type: LogUniform, Min: f(0.001), Max: f(1)},
			"trainer.builtin.model.hidden.0": {Type: Int, Min: f(8), Max: f(128)},
		},
		NumTrials: 8, MaxConcurrent: 2, Seed: 7,
		Metric:    Metric{Name: "loss", Mode: Min},
		Scheduler: Scheduler{Kind: "asha", Grace: 10, Max: 160, ReductionFactor: 4},
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
