package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func exampleSpecJSON(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func validSpec() Spec {
	return Spec{
		Name:     "mlp",
		Workers:  WorkerRange{Min: 1, Max: 3},
		Priority: Guaranteed,
		Trainer: Trainer{Kind: TrainerBuiltin, Builtin: &BuiltinTrainer{
			Model:   MLPModel{Hidden: []int{16}},
			Dataset: SyntheticDataset{Seed: 1, Samples: 1000, Features: 8, Classes: 3, Partitions: 8},
			Epochs:  1, BatchSize: 32, LearningRate: 0.1, Momentum: 0.9,
		}},
		Checkpoint: CheckpointPolicy{EverySteps: 100, Keep: 2},
	}
}

func TestExampleJobIsValid(t *testing.T) {
	s, err := DecodeSpec(exampleSpecJSON(t))
	if err != nil {
		t.Fatalf("examples/job.json: %v", err)
	}
	if s.Workers != (WorkerRange{Min: 1, Max: 3}) || s.GPUsPerWorker != 0 || s.Trainer.Kind != TrainerBuiltin {
		t.Errorf("examples/job.json decoded to %+v", s)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*Spec)
		fields []string // offending fields, in order; none = valid
	}{
		{"valid", func(*Spec) {}, nil},
		{"missing name", func(s *Spec) { s.Name = "" }, []string{"name"}},
		{"uppercase name", func(s *Spec) { s.Name = "MLP" }, []string{"name"}},
		{"name ends with dash", func(s *Spec) { s.Name = "mlp-" }, []string{"name"}},
		{"min zero", func(s *Spec) { s.Workers.Min = 0 }, []string{"workers.min"}},
		{"max below min", func(s *Spec) { s.Workers = WorkerRange{Min: 4, Max: 2} }, []string{"workers.max"}},
		{"max too big", func(s *Spec) { s.Workers.Max = 1025 }, []string{"workers.max"}},
		{"max 1024 ok", func(s *Spec) { s.Workers.Max = 1024 }, nil},
		{"gpus too many", func(s *Spec) { s.GPUsPerWorker = 17 }, []string{"gpus_per_worker"}},
		{"gpus negative", func(s *Spec) { s.GPUsPerWorker = -1 }, []string{"gpus_per_worker"}},
		{"gpu constraint on cpu job", func(s *Spec) { s.GPU = &GPUConstraint{Model: "A100"} }, []string{"gpu"}},
		{"gpu constraint ok", func(s *Spec) { s.GPUsPerWorker = 2; s.GPU = &GPUConstraint{Model: "A100", MinMemoryMiB: 40000} }, nil},
		{"bad priority", func(s *Spec) { s.Priority = "high" }, []string{"priority"}},
		{"no trainer kind", func(s *Spec) { s.Trainer.Kind = "" }, []string{"trainer.kind"}},
		{"builtin without config", func(s *Spec) { s.Trainer.Builtin = nil }, []string{"trainer.builtin"}},
		{"builtin with exec", func(s *Spec) { s.Trainer.Exec = &ExecTrainer{Command: []string{"x"}} }, []string{"trainer.exec"}},
		{"exec well formed", func(s *Spec) {
			s.Trainer = Trainer{Kind: TrainerExec, Exec: &ExecTrainer{Command: []string{"python3", "train.py"}, Env: map[string]string{"FOO": "1"}}}
		}, nil},
		{"exec empty command", func(s *Spec) { s.Trainer = Trainer{Kind: TrainerExec, Exec: &ExecTrainer{}} }, []string{"trainer.exec.command"}},
		{"exec reserved env", func(s *Spec) {
			s.Trainer = Trainer{Kind: TrainerExec, Exec: &ExecTrainer{Command: []string{"x"}, Env: map[string]string{"RANK": "0", "1X": "y"}}}
		}, []string{"trainer.exec.env.1X", "trainer.exec.env.RANK"}},
		{"hidden layer zero", func(s *Spec) { s.Trainer.Builtin.Model.Hidden = []int{8, 0} }, []string{"trainer.builtin.model.hidden[1]"}},
		{"partitions over samples", func(s *Spec) { s.Trainer.Builtin.Dataset.Partitions = 2000 }, []string{"trainer.builtin.dataset.partitions"}},
		{"one class", func(s *Spec) { s.Trainer.Builtin.Dataset.Classes = 1 }, []string{"trainer.builtin.dataset.classes"}},
		{"lr zero", func(s *Spec) { s.Trainer.Builtin.LearningRate = 0 }, []string{"trainer.builtin.learning_rate"}},
		{"momentum one", func(s *Spec) { s.Trainer.Builtin.Momentum = 1 }, []string{"trainer.builtin.momentum"}},
		{"bad batch policy", func(s *Spec) { s.Trainer.Builtin.BatchPolicy = "auto" }, []string{"trainer.builtin.batch_policy"}},
		{"keep zero", func(s *Spec) { s.Checkpoint.Keep = 0 }, []string{"checkpoint.keep"}},
		{"every steps negative", func(s *Spec) { s.Checkpoint.EverySteps = -1 }, []string{"checkpoint.every_steps"}},
		{"callback ftp", func(s *Spec) { s.CallbackURL = "ftp://x/y" }, []string{"callback_url"}},
		{"callback no host", func(s *Spec) { s.CallbackURL = "https:///x" }, []string{"callback_url"}},
		{"callback ok", func(s *Spec) { s.CallbackURL = "https://ci.example.com/hook?x=1" }, nil},
		{"label key bad", func(s *Spec) { s.Labels = map[string]string{"a b": "x"} }, []string{"labels.a b"}},
		{"label value long", func(s *Spec) { s.Labels = map[string]string{"k": strings.Repeat("v", 257)} }, []string{"labels.k"}},
		{"too many labels", func(s *Spec) {
			s.Labels = map[string]string{}
			for i := 0; i < 33; i++ {
				s.Labels[strings.Repeat("k", i+1)] = "v"
			}
		}, []string{"labels"}},
		{"several at once", func(s *Spec) { s.Name = ""; s.Workers.Min = 0; s.Priority = "x" }, []string{"name", "workers.min", "priority"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.edit(&s)
			err := s.Validate()
			if len(tc.fields) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want *ValidationError for %v, got %v", tc.fields, err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
				if f.Reason == "" {
					t.Errorf("field %s has no reason", f.Field)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Errorf("fields: want %v, got %v (%v)", tc.fields, got, err)
			}
		})
	}
}

func TestDecodeSpec(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantField string // "" with wantSyntax false = valid
		syntax    bool
	}{
		{"example", string(exampleSpecJSON(t)), "", false},
		{"unknown top-level field", `{"name":"a","bogus":1}`, "bogus", false},
		{"wrong type", `{"name":"a","workers":{"min":"one"}}`, "workers.min", false},
		{"number overflow", `{"name":"a","workers":{"min":1e40}}`, "workers.min", false},
		{"truncated", `{"name":"a"`, "", true},
		{"empty", ``, "", true},
		{"garbage", `nope`, "", true},
		{"trailing data", `{"name":"a"} {}`, "", true},
		{"array", `[]`, "(body)", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSpec([]byte(tc.body))
			var de *DecodeError
			var ve *ValidationError
			switch {
			case tc.syntax:
				if !errors.As(err, &de) {
					t.Fatalf("want *DecodeError, got %T %v", err, err)
				}
			case tc.wantField == "":
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
			default:
				if !errors.As(err, &ve) || ve.Fields[0].Field != tc.wantField {
					t.Fatalf("want field %q at fault, got %T %v", tc.wantField, err, err)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	s := validSpec()
	s.Priority, s.Checkpoint.Keep = "", 0
	d := s.WithDefaults()
	if d.Priority != Guaranteed || d.Checkpoint.Keep != DefaultKeep || d.Trainer.Builtin.BatchPolicy != FixedGlobal {
		t.Errorf("defaults not applied: %+v", d)
	}
	if s.Trainer.Builtin.BatchPolicy != "" {
		t.Error("WithDefaults modified its receiver's trainer")
	}
}
