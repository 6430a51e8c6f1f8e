package jobs

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestDeadlineSpec(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	cmd := []string{"/usr/bin/python3", "train.py"}
	tests := []struct {
		name   string
		json   string // the spec's deadline fields, spliced into a built-in job without workers
		exec   bool
		fields []string
	}{
		{"within, no workers", `"within":"2h"`, false, nil},
		{"deadline and policy", `"deadline":"2026-12-02T06:00:00Z","deadline_policy":"best_effort"`, false, nil},
		{"both", `"deadline":"2026-12-02T06:00:00Z","within":"2h"`, false, []string{"within"}},
		{"bad within", `"within":"soon"`, false, []string{"within"}},
		{"negative within", `"within":"-5m"`, false, []string{"within"}},
		{"policy without deadline", `"deadline_policy":"best_effort","workers":{"min":1,"max":2}`, false, []string{"deadline_policy"}},
		{"unknown policy", `"within":"1h","deadline_policy":"sometimes"`, false, []string{"deadline_policy"}},
		{"exec without total_steps", `"within":"1h"`, true, []string{"trainer.exec.total_steps"}},
		{"exec with total_steps", `"within":"1h","trainer":{"kind":"exec","exec":{"command":["/usr/bin/python3","train.py"],"total_steps":500}}`, true, nil},
		{"no workers without a deadline", ``, false, []string{"workers.min", "workers.max"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trainer := `"trainer":{"kind":"builtin","builtin":{"model":{"hidden":[16]},"dataset":{"seed":1,"samples":1000,"features":8,"classes":3,"partitions":8},"epochs":2,"batch_size":32,"learning_rate":0.1,"momentum":0.9}}`
			if tt.exec {
				trainer = `"trainer":{"kind":"exec","exec":{"command":["/usr/bin/python3","train.py"]}}`
			}
			body := `{"name":"d",` + trainer
			if tt.json != "" {
				body += "," + tt.json
			}
			body += "}"
			if tt.json != "" && slices.Contains([]string{"exec with total_steps"}, tt.name) {
				body = `{"name":"d",` + tt.json + `}`
			}
			s, err := DecodeSpec([]byte(body))
			var ve *ValidationError
			if len(tt.fields) == 0 {
				if err != nil {
					t.Fatalf("%s: %v", body, err)
				}
				if s.Workers.Min != 1 || s.Workers.Max != MaxWorkers || s.DeadlinePolicy == "" {
					t.Errorf("defaults: workers %+v, policy %q", s.Workers, s.DeadlinePolicy)
				}
				return
			}
			if !errors.As(err, &ve) {
				t.Fatalf("%s: err %v, want fields %v", body, err, tt.fields)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields %v, want %v", got, tt.fields)
			}
		})
	}
	s := validSpec()
	s.Deadline = &at
	if got := s.DeadlineAt(at.Add(-time.Hour)); !got.Equal(at) {
		t.Errorf("DeadlineAt %v", got)
	}
	s.Deadline, s.Within = nil, "90m"
	if got := s.DeadlineAt(at); !got.Equal(at.Add(90 * time.Minute)) {
		t.Errorf("within: DeadlineAt %v", got)
	}
	if s.Work() != 1000 {
		t.Errorf("work %g, want samples x epochs 1000", s.Work())
	}
	if e := execSpec(ExecTrainer{Command: cmd, TotalSteps: 77}); e.Work() != 77 {
		t.Errorf("exec work %g", e.Work())
	}
	c := s
	c.Deadline = &at
	cl := c.Clone()
	*cl.Deadline = at.Add(time.Hour)
	if !c.Deadline.Equal(at) {
		t.Error("Clone shares the deadline")
	}
}
