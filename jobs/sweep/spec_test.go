package sweep

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/jobs"
)

func TestValidateNamesTheField(t *testing.T) {
	exec := func() Spec {
		s := builtinSpec()
		s.Template.Trainer = jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{
			Command: []string{"/usr/bin/python3", "train.py", "--lr", "${params.lr}"}, Env: map[string]string{"WIDTH": "${params.width}"}}}
		s.Parameters = map[string]Parameter{"lr": {Type: Uniform, Min: f(0.01), Max: f(0.1)}, "width": {Type: Choice, Values: []any{64.0, 128.0}}}
		return s
	}
	cases := []struct {
		name  string
		edit  func(*Spec)
		field string
	}{
		{"valid builtin", func(*Spec) {}, ""},
		{"valid exec", func(s *Spec) { *s = exec() }, ""},
		{"name", func(s *Spec) { s.Name = "Bad Name" }, "name"},
		{"num_trials", func(s *Spec) { s.NumTrials = 0 }, "num_trials"},
		{"max_concurrent", func(s *Spec) { s.MaxConcurrent = 0 }, "max_concurrent"},
		{"metric.name", func(s *Spec) { s.Metric.Name = "" }, "metric.name"},
		{"metric.mode", func(s *Spec) { s.Metric.Mode = "lowest" }, "metric.mode"},
		{"scheduler.kind", func(s *Spec) { s.Scheduler.Kind = "hyperband" }, "scheduler.kind"},
		{"scheduler.grace", func(s *Spec) { s.Scheduler.Grace = 0 }, "scheduler.grace"},
		{"scheduler.max", func(s *Spec) { s.Scheduler.Max = 5 }, "scheduler.max"},
		{"scheduler.reduction_factor", func(s *Spec) { s.Scheduler.ReductionFactor = 1 }, "scheduler.reduction_factor"},
		{"no parameters", func(s *Spec) { s.Parameters = nil }, "parameters"},
		{"bad type", func(s *Spec) { s.Parameters["trainer.builtin.lr"] = Parameter{Type: "normal"} }, "parameters[trainer.builtin.lr].type"},
		{"min > max", func(s *Spec) { s.Parameters["trainer.builtin.lr"] = Parameter{Type: Uniform, Min: f(2), Max: f(1)} }, "parameters[trainer.builtin.lr].max"},
		{"loguniform at 0", func(s *Spec) { s.Parameters["trainer.builtin.lr"] = Parameter{Type: LogUniform, Min: f(0), Max: f(1)} }, "parameters[trainer.builtin.lr].min"},
		{"int not integral", func(s *Spec) {
			s.Parameters["trainer.builtin.model.hidden.0"] = Parameter{Type: Int, Min: f(1.5), Max: f(3)}
		}, "parameters[trainer.builtin.model.hidden.0].min"},
		{"empty choice", func(s *Spec) { s.Parameters["trainer.builtin.lr"] = Parameter{Type: Choice} }, "parameters[trainer.builtin.lr].values"},
		{"path to nowhere", func(s *Spec) { s.Parameters["trainer.builtin.nope"] = Parameter{Type: Uniform, Min: f(0), Max: f(1)} }, "parameters[trainer.builtin.nope]"},
		{"path in another case", func(s *Spec) {
			s.Parameters["trainer.builtin.Momentum"] = Parameter{Type: Uniform, Min: f(0), Max: f(0.5)}
		}, "parameters[trainer.builtin.Momentum]"},
		{"index past the array", func(s *Spec) {
			s.Parameters["trainer.builtin.model.hidden.5"] = Parameter{Type: Choice, Values: []any{16.0}}
		}, "parameters[trainer.builtin.model.hidden.5]"},
		{"metric the built-in trainer never reports", func(s *Spec) { s.Metric = Metric{Name: "accuracy", Mode: Max} }, "metric.name"},
		{"any metric for exec trials", func(s *Spec) { *s = exec(); s.Metric = Metric{Name: "bleu", Mode: Max} }, ""},
		{"choice value of the wrong type", func(s *Spec) {
			s.Parameters["trainer.builtin.model.hidden"] = Parameter{Type: Choice, Values: []any{[]any{16.0}, "wide"}}
		}, "parameters[trainer.builtin.model.hidden].values[1]"},
		{"value out of the job's bounds", func(s *Spec) {
			s.Parameters["trainer.builtin.model.hidden.0"] = Parameter{Type: Int, Min: f(8), Max: f(1e6)}
		}, "parameters[trainer.builtin.model.hidden.0]"},
		{"unused name", func(s *Spec) { s.Parameters["depth"] = Parameter{Type: Int, Min: f(1), Max: f(3)} }, "parameters[depth]"},
		{"placeholder without parameter", func(s *Spec) { *s = exec(); delete(s.Parameters, "width") }, "template.trainer.exec"},
		{"deadline", func(s *Spec) { s.Template.Within = "1h" }, "template.deadline"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := builtinSpec()
			c.edit(&s)
			err := s.WithDefaults().Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ve *jobs.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a *jobs.ValidationError naming %s, got %v", c.field, err)
			}
			if ve.Fields[0].Field != c.field {
				t.Fatalf("field: want %s, got %s (%v)", c.field, ve.Fields[0].Field, err)
			}
		})
	}
}

func TestSampleIsSeededPerTrial(t *testing.T) {
	s := builtinSpec()
	a, b := NewTrials(s), NewTrials(s)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different trials")
	}
	more := s
	more.NumTrials = 20
	if c := NewTrials(more); !reflect.DeepEqual(c[:8], a) {
		t.Fatal("trial i's parameters depend on num_trials")
	}
	other := s
	other.Seed = 8
	if reflect.DeepEqual(NewTrials(other), a) {
		t.Fatal("another seed drew the same trials")
	}
	seen := map[string]bool{}
	for _, tr := range a {
		lr := tr.Params["trainer.builtin.lr"].(float64)
		w := tr.Params["trainer.builtin.model.hidden.0"].(int64)
		if lr < 0.001 || lr >= 1 || w < 8 || w > 128 {
			t.Fatalf("trial %d out of its domain: %v", tr.Index, tr.Params)
		}
		seen[mustJSON(t, tr.Params)] = true
	}
	if len(seen) < 8 {
		t.Fatalf("only %d distinct trials of 8", len(seen))
	}
}

func TestApply(t *testing.T) {
	s := builtinSpec()
	spec, err := TrialSpec(s, "s-1", 3, map[string]any{"trainer.builtin.lr": 0.25, "trainer.builtin.model.hidden.0": int64(64)})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Trainer.Builtin.LearningRate != 0.25 || spec.Trainer.Builtin.Model.Hidden[0] != 64 {
		t.Fatalf("parameters not applied: %+v", spec.Trainer.Builtin)
	}
	if spec.Name != "mlp-3" || spec.Labels[LabelSweep] != "s-1" || spec.Labels[LabelTrial] != "3" {
		t.Fatalf("name or labels: %s %v", spec.Name, spec.Labels)
	}
	if s.Template.Trainer.Builtin.LearningRate != 0.1 {
		t.Fatal("the template was changed")
	}
	ex := jobs.Spec{Name: "t", Workers: jobs.WorkerRange{Min: 1, Max: 2}, Trainer: jobs.Trainer{Kind: jobs.TrainerExec, Exec: &jobs.ExecTrainer{
		Command: []string{"prog", "--lr=${params.lr}", "${params.width}"}, Env: map[string]string{"OPT": "${params.opt}"}}}}
	got, err := Apply(ex, map[string]any{"lr": 0.003, "width": int64(256), "opt": "adam"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Trainer.Exec.Command, " ") != "prog --lr=0.003 256" || got.Trainer.Exec.Env["OPT"] != "adam" {
		t.Fatalf("placeholders: %v %v", got.Trainer.Exec.Command, got.Trainer.Exec.Env)
	}
}
