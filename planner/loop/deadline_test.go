package loop

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner"
)

func TestDeadlineEnd(t *testing.T) {
	due := at0.Add(time.Hour)
	for _, tc := range []struct {
		state jobs.State
		end   time.Time
		typ   jobs.EventType
		msg   string
	}{
		{jobs.Succeeded, due.Add(-90 * time.Second), jobs.EventDeadlineMet, "finished 1m30s before"},
		{jobs.Succeeded, due, jobs.EventDeadlineMet, "finished 0s before"},
		{jobs.Succeeded, due.Add(5 * time.Second), jobs.EventDeadlineMissed, "finished 5s after"},
		{jobs.Failed, due.Add(-time.Minute), jobs.EventDeadlineMissed, "the job failed"},
		{jobs.Cancelled, due.Add(-time.Minute), "", ""},
	} {
		f := due.Add(-time.Minute)
		j := jobs.Job{State: tc.state, CreatedAt: at0, Spec: jobs.Spec{Within: "1h"}, AtRisk: true, ExpectedFinish: &f}
		evs := deadlineEnd(&j, tc.end, at0)
		if tc.typ == "" {
			if len(evs) != 0 {
				t.Errorf("%s: events %+v, want none", tc.state, evs)
			}
			continue
		}
		if len(evs) != 1 || evs[0].Type != tc.typ || !strings.Contains(evs[0].Message, tc.msg) {
			t.Errorf("%s at %s: %+v, want one %s saying %q", tc.state, tc.end.Sub(due), evs, tc.typ, tc.msg)
		}
		if j.AtRisk || j.ExpectedFinish != nil {
			t.Errorf("%s: the estimate stays on the ended job", tc.state)
		}
		// The record says what the event says (edl get and the dashboard
		// read it), with the same end time.
		r := j.DeadlineResult
		if r == nil || r.Met != (tc.typ == jobs.EventDeadlineMet) || !r.Finished.Equal(tc.end) || r.Failed != (tc.state == jobs.Failed) {
			t.Errorf("%s at %s: deadline_result %+v, want met %v, finished %s", tc.state, tc.end.Sub(due), r, tc.typ == jobs.EventDeadlineMet, tc.end)
		}
	}
	if evs := deadlineEnd(&jobs.Job{State: jobs.Succeeded}, at0, at0); evs != nil {
		t.Errorf("a job without a deadline: %+v", evs)
	}
}

func TestWithDeadlineRecordsWhenTheEstimateMoves(t *testing.T) {
	due := at0.Add(time.Hour)
	fin := at0.Add(30 * time.Minute)
	rec := func(f *time.Time, risk bool) *jobs.Job {
		return &jobs.Job{Spec: jobs.Spec{Within: "1h"}, CreatedAt: at0, Deadline: &due, ExpectedFinish: f, AtRisk: risk}
	}
	at := func(d time.Duration) *time.Time { x := fin.Add(d); return &x }
	for _, tc := range []struct {
		name   string
		job    *jobs.Job
		target planner.DeadlineTarget
		want   bool
	}{
		{"first estimate", rec(nil, false), planner.DeadlineTarget{Finish: fin, Feasible: true}, true},
		{"jitter within tolerance", rec(at(3*time.Second), false), planner.DeadlineTarget{Finish: fin, Feasible: true}, false},
		{"moved", rec(at(-10*time.Second), false), planner.DeadlineTarget{Finish: fin, Feasible: true}, true},
		{"now at risk", rec(at(0), false), planner.DeadlineTarget{Finish: fin, Feasible: false}, true},
		{"never finishes now", rec(at(0), true), planner.DeadlineTarget{}, true},
		{"still never", rec(nil, true), planner.DeadlineTarget{}, false},
		{"at risk, back in time by a little: stays at risk", rec(at(0), true), planner.DeadlineTarget{Finish: due.Add(-5 * time.Second), Feasible: true}, true},
		{"at risk, clearly back in time", rec(at(0), true), planner.DeadlineTarget{Finish: fin, Feasible: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observed{job: tc.job}
			s := withDeadline(scaleStep{job: tc.job, target: planner.Target{Deadline: &tc.target}}, o, nil, at0.Add(50*time.Minute))
			if s.record != tc.want {
				t.Errorf("record = %v, want %v", s.record, tc.want)
			}
			if want := tc.job.AtRisk && strings.Contains(tc.name, "stays") || !tc.target.Feasible; s.dl.atRisk != want {
				t.Errorf("at risk = %v, want %v", s.dl.atRisk, want)
			}
		})
	}
}

func TestRecordDeadlineWarnsOncePerCrossing(t *testing.T) {
	j := jobs.Job{Spec: jobs.Spec{Within: "1h"}, CreatedAt: at0}
	late := &deadlineEstimate{finish: at0.Add(2 * time.Hour), atRisk: true, reason: "even at 4 workers it would finish 3600 s after its deadline"}
	ok := &deadlineEstimate{finish: at0.Add(30 * time.Minute)}
	var warned []int
	for i, e := range []*deadlineEstimate{ok, late, late, ok, late} {
		if evs := recordDeadline(&j, e, at0); len(evs) > 0 {
			if evs[0].Type != jobs.EventDeadlineAtRisk || evs[0].Data["late_s"] != 3600.0 {
				t.Errorf("event %+v", evs[0])
			}
			warned = append(warned, i)
		}
	}
	if len(warned) != 2 || warned[0] != 1 || warned[1] != 4 {
		t.Errorf("warned at %v, want at each crossing [1 4]", warned)
	}
	if j.Deadline == nil || !j.Deadline.Equal(at0.Add(time.Hour)) || !j.AtRisk || !j.ExpectedFinish.Equal(at0.Add(2*time.Hour)) {
		t.Errorf("record: deadline %v expected %v at risk %v", j.Deadline, j.ExpectedFinish, j.AtRisk)
	}
}

func countEvents(t *testing.T, store interface {
	Events(context.Context, string, string, int) ([]jobs.Event, error)
}, id string, typ jobs.EventType) (n int, last jobs.Event) {
	t.Helper()
	evs, err := store.Events(context.Background(), id, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == typ {
			n, last = n+1, e
		}
	}
	return n, last
}

// TestRoundKeepsTheDeadlineEstimate runs a deadline job through the loop:
// the record gets its deadline and expected finish, a measured speed far
// below the prior puts it at risk (one event, however many rounds), a speed
// above it re-plans it from its least share, and its end is "met", once.
func TestRoundKeepsTheDeadlineEstimate(t *testing.T) {
	cl := newFakeCluster(4)
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	l, store := newTestLoop(t, cl, func(c *Config) { c.Now = now })
	ctx := context.Background()
	spec := exampleSpec(t, 0, 0)
	spec.Within, spec.PerWorkerSpeed = "10m", 1000 // 360,000 samples: 6 min at one worker
	spec.Workers.Max = 4
	j, _, err := store.Create(ctx, "t1", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	if j.Deadline == nil || !j.Deadline.Equal(j.CreatedAt.Add(10*time.Minute)) {
		t.Fatalf("created with deadline %v, want created + 10m", j.Deadline)
	}
	round := func() jobs.Job {
		t.Helper()
		if err := l.Round(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := store.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := round()
	if got.ExpectedFinish == nil || got.AtRisk || got.ExpectedFinish.After(*got.Deadline) {
		t.Fatalf("first round: expected finish %v at risk %v (deadline %v)", got.ExpectedFinish, got.AtRisk, got.Deadline)
	}
	if got.Workers.Target != 1 {
		t.Fatalf("planned at %d workers, want its least share 1", got.Workers.Target)
	}
	later := func() {
		mu.Lock()
		clock = clock.Add(estimateSettle)
		mu.Unlock()
	}
	// A report right after the start is no measurement yet; 10x slower
	// than the prior once settled: even 4 workers miss the deadline.
	if err := store.SetProgress(ctx, j.ID, jobs.Progress{Step: 1, Samples: 128, SamplesPerS: 100, WorldSize: 1}); err != nil {
		t.Fatal(err)
	}
	if got = round(); got.AtRisk || got.Workers.Target != 1 {
		t.Fatalf("on a report right after its start: at risk %v, %d workers", got.AtRisk, got.Workers.Target)
	}
	later()
	if err := store.SetProgress(ctx, j.ID, jobs.Progress{Step: 1, Samples: 128, SamplesPerS: 100, WorldSize: 1}); err != nil {
		t.Fatal(err)
	}
	got = round()
	if !got.AtRisk || got.Workers.Target != 4 {
		t.Fatalf("after a slow measurement: at risk %v, %d workers; want at risk at 4", got.AtRisk, got.Workers.Target)
	}
	round()
	round()
	if n, e := countEvents(t, store, j.ID, jobs.EventDeadlineAtRisk); n != 1 || e.Data["deadline"] == nil {
		t.Fatalf("%d deadline_at_risk events (%+v), want 1", n, e)
	}
	// Fast at 4 workers: it is in time again and needs fewer (once the
	// report is not from right after its resize).
	if err := store.SetProgress(ctx, j.ID, jobs.Progress{Step: 2, Samples: 256, SamplesPerS: 40000, WorldSize: 4}); err != nil {
		t.Fatal(err)
	}
	if got = round(); got.Workers.Target != 4 {
		t.Fatalf("re-planned to %d workers on a report right after its resize", got.Workers.Target)
	}
	later()
	if err := store.SetProgress(ctx, j.ID, jobs.Progress{Step: 3, Samples: 384, SamplesPerS: 41000, WorldSize: 4}); err != nil {
		t.Fatal(err)
	}
	got = round()
	if got.AtRisk || got.Workers.Target >= 4 || got.ExpectedFinish.After(*got.Deadline) {
		t.Fatalf("after a fast measurement: at risk %v, %d workers, finish %v; want in time at fewer than 4", got.AtRisk, got.Workers.Target, got.ExpectedFinish)
	}
	if _, e := countEvents(t, store, j.ID, jobs.EventScale); !strings.Contains(e.Message, "re-planned from its least share") {
		t.Errorf("the shrink's event does not say why: %q", e.Message)
	}
	if _, err := store.Transition(ctx, j.ID, jobs.Running, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Transition(ctx, j.ID, jobs.Succeeded, "training finished"); err != nil {
		t.Fatal(err)
	}
	got = round()
	round()
	if n, e := countEvents(t, store, j.ID, jobs.EventDeadlineMet); n != 1 || e.Data["early_s"] == nil {
		t.Fatalf("%d deadline_met events (%+v), want 1", n, e)
	}
	if n, _ := countEvents(t, store, j.ID, jobs.EventDeadlineMissed); n != 0 {
		t.Fatalf("%d deadline_missed events", n)
	}
	if got.AtRisk || got.ExpectedFinish != nil || got.Deadline == nil {
		t.Errorf("ended job: at risk %v, expected %v, deadline %v", got.AtRisk, got.ExpectedFinish, got.Deadline)
	}
	if got, err = store.Get(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	_, e := countEvents(t, store, j.ID, jobs.EventDeadlineMet)
	if r := got.DeadlineResult; r == nil || !r.Met || r.Finished.UTC().Format(time.RFC3339) != e.Data["finished"] {
		t.Errorf("the record's deadline_result %+v, the event's finished %v: want met at the same time", r, e.Data["finished"])
	}
}

func TestSmoothedSpeed(t *testing.T) {
	dlJob := &jobs.Job{Spec: jobs.Spec{Within: "1h"}}
	plain := &jobs.Job{}
	thr := map[int]float64{2: 1000}
	for _, tc := range []struct {
		job  *jobs.Job
		p    jobs.Progress
		want float64
	}{
		{dlJob, jobs.Progress{WorldSize: 2, SamplesPerS: 2000}, 1300},
		{dlJob, jobs.Progress{WorldSize: 3, SamplesPerS: 2000}, 2000}, // first at that size
		{plain, jobs.Progress{WorldSize: 2, SamplesPerS: 2000}, 2000},
	} {
		if got := smoothed(tc.job, thr, tc.p); got != tc.want {
			t.Errorf("smoothed(deadline %v, %+v) = %g, want %g", tc.job.Spec.HasDeadline(), tc.p, got, tc.want)
		}
	}
}
