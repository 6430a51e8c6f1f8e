package jobstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

func TestProgressHistory(t *testing.T) {
	ctx := context.Background()
	r := testenv.NewRedis(t)
	tests := []struct {
		name    string
		cfg     jobstore.Config
		reports []jobs.Progress
		sleep   time.Duration
		// want is the steps of the points kept
		want []int64
	}{
		{
			name:    "every report kept when the interval allows",
			cfg:     jobstore.Config{ProgressEvery: time.Nanosecond},
			reports: []jobs.Progress{{Step: 1, WorldSize: 1}, {Step: 2, WorldSize: 1}, {Step: 3, WorldSize: 1}},
			want:    []int64{1, 2, 3},
		},
		{
			name: "reports faster than the interval are thinned, resizes and epochs always kept",
			cfg:  jobstore.Config{ProgressEvery: time.Hour},
			reports: []jobs.Progress{
				{Step: 1, WorldSize: 1}, {Step: 2, WorldSize: 1}, // 2 dropped: too soon
				{Step: 3, WorldSize: 2},           // resize
				{Step: 4, WorldSize: 2},           // dropped
				{Step: 5, WorldSize: 2, Epoch: 1}, // new epoch
			},
			want: []int64{1, 3, 5},
		},
		{
			name: "capped: the oldest are trimmed",
			cfg:  jobstore.Config{ProgressEvery: time.Nanosecond, ProgressMaxLen: 1},
			// MAXLEN ~ trims whole nodes only; the exact cap shows that
			// trimming happens at all without a test of 100s of points.
			reports: func() []jobs.Progress {
				var ps []jobs.Progress
				for i := int64(1); i <= 300; i++ {
					ps = append(ps, jobs.Progress{Step: i, WorldSize: 1})
				}
				return ps
			}(),
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Prefix = r.Prefix + string(rune('a'+i)) + ":"
			s := jobstore.New(r.Client, tc.cfg)
			j, _, err := s.Create(ctx, "team-a", spec("p", nil), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetWorkers(ctx, j.ID, 2, 3); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.reports {
				if err := s.SetProgress(ctx, j.ID, p); err != nil {
					t.Fatal(err)
				}
				if tc.cfg.ProgressEvery < time.Millisecond {
					time.Sleep(time.Millisecond) // the interval is checked in whole ms
				}
			}
			pts, err := s.ProgressHistory(ctx, j.ID, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil { // the capped case
				if len(pts) == 0 || len(pts) >= len(tc.reports) {
					t.Fatalf("%d points kept of %d, want fewer (trimmed) and some", len(pts), len(tc.reports))
				}
				if last := pts[len(pts)-1]; last.Step != 300 {
					t.Fatalf("newest point has step %d, want 300", last.Step)
				}
				return
			}
			var got []int64
			for _, p := range pts {
				got = append(got, p.Step)
				if p.WorkersCurrent != 2 || p.WorkersTarget != 3 || p.ID == "" || p.Time.IsZero() {
					t.Errorf("point %+v: want workers 2/3, an ID and a time", p)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("steps kept %v, want %v", got, tc.want)
			}
			for k := range got {
				if got[k] != tc.want[k] {
					t.Fatalf("steps kept %v, want %v", got, tc.want)
				}
			}
			// since= is exclusive and pages on
			rest, err := s.ProgressHistory(ctx, j.ID, pts[0].ID, 0)
			if err != nil || len(rest) != len(pts)-1 {
				t.Fatalf("since %s: %d points, %v; want %d", pts[0].ID, len(rest), err, len(pts)-1)
			}
			one, err := s.ProgressHistory(ctx, j.ID, "", 1)
			if err != nil || len(one) != 1 || one[0].Step != tc.want[0] {
				t.Fatalf("limit 1: %+v %v", one, err)
			}
		})
	}
}

// A diverged loss (NaN, an infinity) is progress like any other: the
// job's record and its history keep it, and read it back as written
// (encoding/json refuses NaN: the job was not written at all, and its
// step stopped at the last finite report).
func TestProgressWithANonFiniteLoss(t *testing.T) {
	s := jobstore.New(testenv.NewRedis(t).Client, jobstore.Config{ProgressEvery: time.Nanosecond})
	ctx := context.Background()
	j, _, err := s.Create(ctx, "team-a", spec("p", nil), "")
	if err != nil {
		t.Fatal(err)
	}
	for i, loss := range []float64{0.5, math.NaN(), math.Inf(1), math.Inf(-1), 0.25} {
		step := int64(i + 1)
		if err := s.SetProgress(ctx, j.ID, jobs.Progress{Step: step, WorldSize: 1, Loss: loss}); err != nil {
			t.Fatalf("step %d, loss %g: %v", step, loss, err)
		}
		got, err := s.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p := got.Progress; p.Step != step || !sameFloat(p.Loss, loss) || p.LossNonFinite != jobs.NonFiniteName(loss) {
			t.Fatalf("step %d: progress %+v, want loss %g", step, p, loss)
		}
		time.Sleep(time.Millisecond)
	}
	pts, err := s.ProgressHistory(ctx, j.ID, "", 0)
	if err != nil || len(pts) != 5 {
		t.Fatalf("history: %d points, %v", len(pts), err)
	}
	if !math.IsNaN(pts[1].Loss) || pts[1].LossNonFinite != "NaN" || !math.IsInf(pts[2].Loss, 1) || pts[4].Loss != 0.25 {
		t.Fatalf("history: %+v", pts)
	}
	b, err := json.Marshal(pts[1])
	if err != nil || !strings.Contains(string(b), `"loss":null`) || !strings.Contains(string(b), `"loss_non_finite":"NaN"`) {
		t.Fatalf("a NaN point as JSON: %s %v, want loss null and loss_non_finite NaN", b, err)
	}
}

func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

func TestProgressHistoryErrors(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.ProgressHistory(ctx, "../x", "", 0); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("bad ID: %v, want ErrNotFound", err)
	}
	var ve *jobs.ValidationError
	if _, err := s.ProgressHistory(ctx, "j-abc", "yesterday", 0); !errors.As(err, &ve) || ve.Fields[0].Field != "since" {
		t.Errorf("bad since: %v, want a validation error on since", err)
	}
	// a job without reports has an empty history, not an error
	j, _, err := s.Create(ctx, "team-a", spec("empty", nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if pts, err := s.ProgressHistory(ctx, j.ID, "", 0); err != nil || len(pts) != 0 {
		t.Errorf("empty history: %v %v", pts, err)
	}
	// SetProgress of a missing job records nothing
	if err := s.SetProgress(ctx, "j-missing", jobs.Progress{Step: 1}); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("SetProgress of a missing job: %v", err)
	}
	if pts, _ := s.ProgressHistory(ctx, "j-missing", "", 0); len(pts) != 0 {
		t.Errorf("history of a missing job: %v", pts)
	}
	_ = jobs.ProgressPointIDAt(time.Now()) // a valid since value
	if _, err := s.ProgressHistory(ctx, j.ID, jobs.ProgressPointIDAt(time.Now()), 0); err != nil {
		t.Errorf("since from a time: %v", err)
	}
}

// TestProgressHistoryEndsWithTheLastProgress: the reports of a job's last
// second are thinned away, so the job's end adds its last progress as the
// history's final point, unless the newest point has that step already.
func TestProgressHistoryEndsWithTheLastProgress(t *testing.T) {
	ctx := context.Background()
	s := jobstore.New(testenv.NewRedis(t).Client, jobstore.Config{ProgressEvery: time.Hour})
	steps := func(id string) []int64 {
		t.Helper()
		pts, err := s.ProgressHistory(ctx, id, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, p := range pts {
			got = append(got, p.Step)
		}
		return got
	}
	end := func(id string, reports ...int64) {
		t.Helper()
		for _, to := range []jobs.State{jobs.Starting, jobs.Running} {
			if _, err := s.Transition(ctx, id, to, ""); err != nil {
				t.Fatal(err)
			}
		}
		for _, step := range reports {
			if err := s.SetProgress(ctx, id, jobs.Progress{Step: step, WorldSize: 1, Loss: 1 / float64(step)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Transition(ctx, id, jobs.Succeeded, "done"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		reports []int64
		want    string
	}{
		{"the thinned last reports end the curve", []int64{1, 2, 3}, "[1 3]"},
		{"no second point of the same step", []int64{5}, "[5]"},
		{"a job that never stepped has no history", nil, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, _, err := s.Create(ctx, "team-a", spec("p", nil), "")
			if err != nil {
				t.Fatal(err)
			}
			end(j.ID, tc.reports...)
			if got := fmt.Sprint(steps(j.ID)); got != tc.want {
				t.Fatalf("steps kept %s, want %s", got, tc.want)
			}
		})
	}
}
