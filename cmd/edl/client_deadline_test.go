package main

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

func TestDeadlineRows(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	j := jobs.Job{CreatedAt: t0, State: jobs.Running, Spec: jobs.Spec{Within: "1h", DeadlinePolicy: jobs.DeadlineStrict}}
	j.Spec.Trainer.Builtin = &jobs.BuiltinTrainer{Epochs: 1, Dataset: jobs.SyntheticDataset{Samples: 1000}}
	j.Progress = jobs.Progress{Samples: 500, SamplesPerS: 1, TotalEpochs: 1, Step: 5}
	tests := []struct {
		name string
		edit func(*jobs.Job)
		want []string
	}{
		{"expected finish", func(*jobs.Job) {}, []string{"Deadline:", "2026-12-02T01:00:00Z (strict)", "Expected finish:"}},
		{"met", func(j *jobs.Job) { j.State, j.UpdatedAt = jobs.Succeeded, t0.Add(50*time.Minute) }, []string{"met, 10m0s early"}},
		{"missed", func(j *jobs.Job) { j.State, j.UpdatedAt = jobs.Succeeded, t0.Add(70*time.Minute) }, []string{"missed by 10m0s"}},
		{"the planner's estimate", func(j *jobs.Job) {
			f := t0.Add(70 * time.Minute)
			j.ExpectedFinish, j.AtRisk = &f, true
		}, []string{"Expected finish:", "2026-12-02T01:10:00Z (at risk)"}},
		{"no plan finishes it", func(j *jobs.Job) { j.AtRisk = true }, []string{"none planned (at risk)"}},
		// The record's result, as the deadline_met event says, not its
		// last write (the teardown's, after the end).
		{"met by the recorded end", func(j *jobs.Job) {
			j.State, j.UpdatedAt = jobs.Succeeded, t0.Add(61*time.Minute)
			j.DeadlineResult = &jobs.DeadlineResult{Met: true, Finished: t0.Add(59 * time.Minute)}
		}, []string{"met, 1m0s early"}},
		{"missed by the recorded end", func(j *jobs.Job) {
			j.State, j.UpdatedAt = jobs.Succeeded, t0.Add(80*time.Minute)
			j.DeadlineResult = &jobs.DeadlineResult{Finished: t0.Add(64 * time.Minute)}
		}, []string{"missed by 4m0s"}},
		{"failed", func(j *jobs.Job) {
			j.State, j.UpdatedAt = jobs.Failed, t0.Add(10*time.Minute)
			j.DeadlineResult = &jobs.DeadlineResult{Failed: true, Finished: t0.Add(10 * time.Minute)}
		}, []string{"missed: the job failed"}},
		{"failed, no result recorded yet", func(j *jobs.Job) { j.State = jobs.Failed }, []string{"missed: the job failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jj := j
			tt.edit(&jj)
			var b bytes.Buffer
			tb := &table{tw: tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)}
			deadlineRows(tb, jj, t0)
			tb.flush()
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("%q lacks %q", b.String(), w)
				}
			}
		})
	}
	var b bytes.Buffer
	tb := &table{tw: tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)}
	deadlineRows(tb, jobs.Job{}, t0)
	tb.flush()
	if b.Len() != 0 {
		t.Errorf("a job without a deadline: %q", b.String())
	}
}
