package sim

import (
	"context"
	"math"
	"testing"
)

// The baselines are the yardstick of every change to the elastic policy:
// their figures on a small trace are pinned here, so that a change to
// planner.Decide or its defaults that moves them fails. The figures were
// measured before the scale-free policy of the sweep was added.
func TestBaselinesArePinned(t *testing.T) {
	tr, _ := FitTrace(readPhilly(t, 300), 32)
	for _, tc := range []struct {
		policy        Policy
		load          float64
		avg, p95      float64 // seconds
		resizes, deci int
	}{
		{FIFO, 1, 3444775.777, 5749017.000, 0, 815},
		{FIFO, 4, 4141041.504, 7112578.250, 0, 817},
		{Tiresias, 1, 1445335.170, 5192026.000, 804, 870},
		{Tiresias, 4, 1788640.813, 6306747.250, 964, 867},
	} {
		o := DefaultOptions(tc.policy)
		o.GPUs, o.Load = 32, tc.load
		r, err := Run(context.Background(), tr, o)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.AvgJCT-tc.avg) > 1e-3 || math.Abs(r.P95JCT-tc.p95) > 1e-3 || r.Resizes != tc.resizes || r.Decisions != tc.deci {
			t.Errorf("%s at load %g: avg %.3f s, p95 %.3f s, %d resizes, %d decisions; pinned %.3f, %.3f, %d, %d",
				tc.policy, tc.load, r.AvgJCT, r.P95JCT, r.Resizes, r.Decisions, tc.avg, tc.p95, tc.resizes, tc.deci)
		}
	}
}

// Only the elastic policies rank by the Gittins index of finished jobs:
// the baselines, the oracle, the legacy policy and --las-order never get
// a service history, and their planner config has Gittins ranking off.
func TestGittinsOnlyForElastic(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want bool
	}{
		{"elastic", DefaultOptions(Elastic), true},
		{"elastic-restart", DefaultOptions(ElasticRestart), true},
		{"fifo", DefaultOptions(FIFO), false},
		{"tiresias", DefaultOptions(Tiresias), false},
		{"elastic las-order", func() Options { o := DefaultOptions(Elastic); o.LASOrder = true; return o }(), false},
		{"elastic oracle", func() Options { o := DefaultOptions(Elastic); o.OracleOrder = true; return o }(), false},
		{"elastic legacy", func() Options { o := DefaultOptions(Elastic); o.LegacyPolicy = true; return o }(), false},
	} {
		if got := tc.o.gittins(); got != tc.want {
			t.Errorf("%s: gittins %v, want %v", tc.name, got, tc.want)
		}
		if on := tc.o.config().GittinsThreshold > 0; on != tc.want {
			t.Errorf("%s: planner config ranks by Gittins: %v, want %v", tc.name, on, tc.want)
		}
	}
	// The order changes elastic's figures on a real trace.
	tr, _ := FitTrace(readPhilly(t, 300), 32)
	o := DefaultOptions(Elastic)
	o.GPUs = 32
	g, err := Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	o.LASOrder = true
	l, err := Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if g.AvgJCT == l.AvgJCT && g.Decisions == l.Decisions {
		t.Errorf("Gittins and least-attained-service order give the same run (avg %.0f s, %d decisions)", g.AvgJCT, g.Decisions)
	}
}
