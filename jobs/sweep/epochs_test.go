package sweep

import (
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// valRun is a trial's job reporting a per-step loss (steps 1..) and a
// validation loss at each epoch's end (epoch e's at its last step, with
// the epochs done), stepsPerEpoch steps an epoch.
func valRun(stepsPerEpoch int64, val ...float64) Observation {
	o := Observation{JobState: jobs.Running, Current: 2, Min: 2, Max: 8, Throughput: map[int]float64{2: 200}}
	for e, v := range val {
		o.Points = append(o.Points, Point{Step: int64(e+1) * stepsPerEpoch, Epoch: e + 1, Value: v})
	}
	return o
}

// TestPositions: with unit "epochs" a point's position is its epochs
// done; with steps (or no unit) its step.
func TestPositions(t *testing.T) {
	pts := []Point{{Step: 9, Epoch: 1, Value: 3}, {Step: 19, Epoch: 2, Value: 2}, {Step: 20, Epoch: 2, Value: 1}}
	cases := []struct {
		unit string
		want []int64
	}{
		{"", []int64{9, 19, 20}},
		{UnitSteps, []int64{9, 19, 20}},
		{UnitEpochs, []int64{1, 2, 2}},
	}
	for _, c := range cases {
		got := Scheduler{Unit: c.unit}.Positions(pts)
		for i, p := range got {
			if p.Step != c.want[i] || p.Value != pts[i].Value {
				t.Errorf("unit %q: positions %+v, want steps %v", c.unit, got, c.want)
				break
			}
		}
	}
}

// TestDecideEpochRungsOnAValidationLoss: rungs in epochs judge the metric
// reported at each epoch's end (val_loss), whatever the steps per epoch;
// in steps the same sparse points are judged at the first one at or past
// the milestone.
func TestDecideEpochRungsOnAValidationLoss(t *testing.T) {
	now := time.Unix(1000, 0)
	sweepOf := func(sc Scheduler) Sweep {
		s := builtinSpec()
		s.NumTrials, s.MaxConcurrent = 3, 3
		s.Template.Workers = jobs.WorkerRange{Min: 2, Max: 8}
		s.Metric = Metric{Name: "val_loss", Mode: Min}
		s.Scheduler = sc
		sw := Sweep{ID: "s-1", State: Running, Spec: s, Trials: NewTrials(s)}
		p := Decide(sw, nil, now)
		for i := range p.Sweep.Trials {
			p.Sweep.Trials[i].JobID = "j-" + string(rune('0'+i))
		}
		return p.Sweep
	}
	epochs := Scheduler{Kind: "asha", Grace: 1, Max: 4, ReductionFactor: 2, Unit: UnitEpochs} // rungs at epochs 1, 2, 4
	cases := []struct {
		name     string
		sc       Scheduler
		obs      map[int]Observation
		want     []TrialState
		rung     []int
		event    string
		resStep0 int64
	}{
		{"epoch 1 reached by all: the worst is cut", epochs,
			map[int]Observation{0: valRun(100, 0.5), 1: valRun(7, 0.9), 2: valRun(250, 0.4)},
			[]TrialState{TrialRunning, TrialCut, TrialRunning}, []int{0, 0, 0}, "cut at rung 0 (epoch 1, val_loss 0.9)", 1},
		{"mid-epoch: no rung before the epoch's end", epochs,
			map[int]Observation{0: {JobState: jobs.Running, Current: 2, Min: 2, Max: 8, Points: []Point{{Step: 99, Value: 0.1}}}},
			[]TrialState{TrialRunning, TrialRunning, TrialRunning}, []int{-1, -1, -1}, "", 0},
		{"two epochs at once: promoted past rungs 0 and 1", epochs,
			map[int]Observation{0: valRun(10, 0.5, 0.4)},
			[]TrialState{TrialRunning, TrialRunning, TrialRunning}, []int{1, -1, -1}, "promoted past rung 1 (epoch 2, val_loss 0.4)", 1},
		{"epoch 4 completes", epochs,
			map[int]Observation{0: valRun(10, 0.5, 0.4, 0.3, 0.2)},
			[]TrialState{TrialCompleted, TrialRunning, TrialRunning}, []int{2, -1, -1}, "completed at epoch 4 (val_loss 0.2)", 1},
		{"steps: the sparse validation loss is taken at the first point past the milestone",
			Scheduler{Kind: "asha", Grace: 50, Max: 400, ReductionFactor: 2},
			map[int]Observation{0: valRun(100, 0.5), 1: valRun(100, 0.9)},
			[]TrialState{TrialRunning, TrialCut, TrialRunning}, []int{1, 0, -1}, "cut at rung 0 (step 50, val_loss 0.9)", 50}, // trial 0 passes rungs 50 and 100 with its step-100 point
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(sweepOf(c.sc), c.obs, now)
			for i, tr := range p.Sweep.Trials {
				rung := -1
				if len(tr.Results) > 0 {
					rung = tr.Results[len(tr.Results)-1].Rung
				}
				if tr.State != c.want[i] || rung != c.rung[i] {
					t.Errorf("trial %d: %s at rung %d, want %s at rung %d", i, tr.State, rung, c.want[i], c.rung[i])
				}
			}
			if c.event != "" {
				found := false
				for _, e := range p.Events {
					found = found || strings.Contains(e.Message, c.event)
				}
				if !found {
					t.Errorf("no event saying %q: %+v", c.event, p.Events)
				}
			}
			if r := p.Sweep.Trials[0].Results; c.resStep0 > 0 && (len(r) == 0 || r[0].Step != c.resStep0) {
				t.Errorf("trial 0's first result %+v, want at %d", r, c.resStep0)
			}
		})
	}
}

// TestDecideEpochsJobEndsEarly: a job whose spec has fewer epochs than
// scheduler.max completes the trial at the last rung with its last epoch's
// value.
func TestDecideEpochsJobEndsEarly(t *testing.T) {
	now := time.Unix(1000, 0)
	s := builtinSpec()
	s.NumTrials, s.MaxConcurrent = 1, 1
	s.Metric = Metric{Name: "val_loss", Mode: Min}
	s.Scheduler = Scheduler{Kind: "asha", Grace: 1, Max: 8, ReductionFactor: 2, Unit: UnitEpochs}
	p := Decide(Sweep{ID: "s-1", State: Running, Spec: s, Trials: NewTrials(s)}, nil, now)
	sw := p.Sweep
	sw.Trials[0].JobID = "j-0"
	o := valRun(10, 0.5, 0.45, 0.4)
	o.JobState, o.EndedAt = jobs.Succeeded, now.Add(-2*MetricsGrace)
	p = Decide(sw, map[int]Observation{0: o}, now)
	tr := p.Sweep.Trials[0]
	last := tr.Results[len(tr.Results)-1]
	if tr.State != TrialCompleted || last.Rung != 3 || last.Step != 3 || last.Value != 0.4 {
		t.Fatalf("trial %s, results %+v; want completed at rung 3 from epoch 3's 0.4", tr.State, tr.Results)
	}
}

func TestSchedulerUnitValidated(t *testing.T) {
	s := builtinSpec()
	s.Scheduler.Unit = "minutes"
	err := s.WithDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "scheduler.unit") {
		t.Fatalf("unit minutes: %v, want an error naming scheduler.unit", err)
	}
	s.Scheduler = Scheduler{Kind: "asha", Grace: 0, Max: 4, Unit: UnitEpochs}
	if err := s.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "at least 1 (epochs)") {
		t.Fatalf("grace 0 in epochs: %v", err)
	}
	s.Scheduler = Scheduler{Kind: "asha", Grace: 1, Max: 4, Unit: UnitEpochs}
	if err := s.WithDefaults().Validate(); err != nil {
		t.Fatalf("a valid epoch scheduler: %v", err)
	}
}
