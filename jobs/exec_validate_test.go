package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func execSpec(e ExecTrainer) Spec {
	s := validSpec()
	s.Trainer = Trainer{Kind: TrainerExec, Exec: &e}
	return s
}

func intp(v int) *int { return &v }

func TestValidateExec(t *testing.T) {
	cmd := []string{"/usr/bin/python3", "train.py"}
	tests := []struct {
		name   string
		exec   ExecTrainer
		fields []string
	}{
		{"minimal", ExecTrainer{Command: cmd}, nil},
		{"every field", ExecTrainer{Command: cmd, Image: "registry.internal/ml/t:1", Env: map[string]string{"OMP_NUM_THREADS": "1"},
			Workdir: "/opt/train", Dataset: &ExecDataset{Samples: 60000, Partitions: 64}, GracePeriodS: intp(5), MaxRestarts: intp(0)}, nil},
		{"empty program", ExecTrainer{Command: []string{""}}, []string{"trainer.exec.command"}},
		{"preloads", ExecTrainer{Command: cmd, Preload: []string{"torch", "torch.distributed", "_x9"}}, nil},
		{"cold", ExecTrainer{Command: cmd, Warm: boolp(false)}, nil},
		{"bad preload", ExecTrainer{Command: cmd, Preload: []string{"torch", "os; rm -rf", "a..b", ""}},
			[]string{"trainer.exec.preload[1]", "trainer.exec.preload[2]", "trainer.exec.preload[3]"}},
		{"too many preloads", ExecTrainer{Command: cmd, Preload: strings.Split(strings.Repeat("m,", MaxPreload)+"m", ",")}, []string{"trainer.exec.preload"}},
		{"preload while cold", ExecTrainer{Command: cmd, Warm: boolp(false), Preload: []string{"torch"}}, []string{"trainer.exec.preload"}},
		{"workdir with newline", ExecTrainer{Command: cmd, Workdir: "a\nb"}, []string{"trainer.exec.workdir"}},
		{"workdir too long", ExecTrainer{Command: cmd, Workdir: strings.Repeat("d", MaxWorkdirLen+1)}, []string{"trainer.exec.workdir"}},
		{"dataset zero", ExecTrainer{Command: cmd, Dataset: &ExecDataset{}}, []string{"trainer.exec.dataset.samples", "trainer.exec.dataset.partitions"}},
		{"dataset partitions over samples", ExecTrainer{Command: cmd, Dataset: &ExecDataset{Samples: 10, Partitions: 11}}, []string{"trainer.exec.dataset.partitions"}},
		{"mode unknown", ExecTrainer{Command: cmd, Mode: "hot"}, []string{"trainer.exec.mode"}},
		{"live without dataset", ExecTrainer{Command: cmd, Mode: ExecLive}, []string{"trainer.exec.dataset"}},
		{"grace negative", ExecTrainer{Command: cmd, GracePeriodS: intp(-1)}, []string{"trainer.exec.grace_period_s"}},
		{"grace zero ok", ExecTrainer{Command: cmd, GracePeriodS: intp(0)}, nil},
		{"grace too long", ExecTrainer{Command: cmd, GracePeriodS: intp(MaxGracePeriodS + 1)}, []string{"trainer.exec.grace_period_s"}},
		{"restarts negative", ExecTrainer{Command: cmd, MaxRestarts: intp(-1)}, []string{"trainer.exec.max_restarts"}},
		{"restarts too many", ExecTrainer{Command: cmd, MaxRestarts: intp(MaxExecRestarts + 1)}, []string{"trainer.exec.max_restarts"}},
		{"torchrun variable reserved", ExecTrainer{Command: cmd, Env: map[string]string{"TORCHELASTIC_RUN_ID": "x"}}, []string{"trainer.exec.env.TORCHELASTIC_RUN_ID"}},
		{"edl variable reserved", ExecTrainer{Command: cmd, Env: map[string]string{"EDL_CHECKPOINT_DIR": "/x"}}, []string{"trainer.exec.env.EDL_CHECKPOINT_DIR"}},
		{"gpus variable reserved", ExecTrainer{Command: cmd, Env: map[string]string{"CUDA_VISIBLE_DEVICES": "0"}}, []string{"trainer.exec.env.CUDA_VISIBLE_DEVICES"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := execSpec(tc.exec).Validate()
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
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Errorf("fields: want %v, got %v (%v)", tc.fields, got, err)
			}
		})
	}
}

func TestExecDefaults(t *testing.T) {
	s := execSpec(ExecTrainer{Command: []string{"x"}})
	d := s.WithDefaults()
	if e := d.Trainer.Exec; e.GracePeriodS == nil || *e.GracePeriodS != 30 || e.MaxRestarts == nil || *e.MaxRestarts != 3 {
		t.Fatalf("exec defaults: got grace %v restarts %v, want 30 and 3", e.GracePeriodS, e.MaxRestarts)
	}
	if s.Trainer.Exec.GracePeriodS != nil {
		t.Error("WithDefaults modified its receiver's exec trainer")
	}
	s = execSpec(ExecTrainer{Command: []string{"x"}, MaxRestarts: intp(0), GracePeriodS: intp(0)})
	if e := s.WithDefaults().Trainer.Exec; *e.MaxRestarts != 0 || *e.GracePeriodS != 0 {
		t.Errorf("explicit zeros replaced: grace %d restarts %d", *e.GracePeriodS, *e.MaxRestarts)
	}
}

func TestExecCloneIsDeep(t *testing.T) {
	s := execSpec(ExecTrainer{Command: []string{"x"}, Dataset: &ExecDataset{Samples: 10, Partitions: 2}, MaxRestarts: intp(2), GracePeriodS: intp(4)})
	c := s.Clone()
	*c.Trainer.Exec.MaxRestarts, *c.Trainer.Exec.GracePeriodS, c.Trainer.Exec.Dataset.Samples = 9, 9, 99
	if e := s.Trainer.Exec; *e.MaxRestarts != 2 || *e.GracePeriodS != 4 || e.Dataset.Samples != 10 {
		t.Errorf("Clone shares exec pointers: %+v", e)
	}
}

// The exec example job is accepted as it is: exec jobs are no longer
// refused at submit.
func TestTorchExampleJobIsValid(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "examples", "torch", "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeSpec(b)
	if err != nil {
		t.Fatalf("examples/torch/job.json: %v", err)
	}
	if s.Trainer.Kind != TrainerExec || len(s.Trainer.Exec.Command) == 0 {
		t.Errorf("examples/torch/job.json decoded to %+v", s.Trainer)
	}
}

func boolp(b bool) *bool { return &b }
