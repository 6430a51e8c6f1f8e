package planner

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// bruteRank is 1/G(a) by trying every quantum on a fine grid as well as
// every sample: the definition, without the prefix-sum shortcut.
func bruteRank(s []float64, a float64) float64 {
	var alive []float64
	for _, v := range s {
		if v > a {
			alive = append(alive, v)
		}
	}
	best := math.Inf(1)
	try := func(d float64) {
		spent, done := 0.0, 0
		for _, v := range alive {
			spent += math.Min(v-a, d)
			if v-a <= d {
				done++
			}
		}
		if done > 0 {
			best = math.Min(best, spent/float64(done))
		}
	}
	for _, v := range alive {
		try(v - a)
	}
	for d := 1.0; d < 1e7; d *= 1.1 {
		try(d)
	}
	return best
}

func TestGittinsRankMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	for c := range 200 {
		s := make([]float64, 1+r.IntN(60))
		for i := range s {
			s[i] = math.Round(60 * math.Pow(10, 4*r.Float64())) // ties happen
		}
		h, err := NewServiceHistory(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, a := range h.grid {
			want := bruteRank(s, a)
			if got := h.rank[k]; math.Abs(got-want) > 1e-9*want {
				t.Fatalf("case %d: rank at %g: %g, the definition gives %g", c, a, got, want)
			}
		}
	}
}

// TestGittinsRanksMatchScan: the hull bisection gives the least over every
// quantum, as a scan of all of them does, on random distributions (many
// values, uneven masses, masses that vanish, a tail beyond the last value).
func TestGittinsRanksMatchScan(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	for c := range 300 {
		n := 1 + r.IntN(400)
		vals := make([]float64, 0, n)
		for v := 1 + 100*r.Float64(); len(vals) < n; v += 1 + r.ExpFloat64()*math.Pow(10, 3*r.Float64()) {
			vals = append(vals, math.Round(v))
		}
		vals = slices.Compact(vals)
		mass := make([]float64, len(vals))
		for k := range mass {
			switch r.IntN(10) {
			case 0:
				mass[k] = 1e-300 // underflows against the others
			case 1:
				mass[k] = 0
			default:
				mass[k] = r.Float64()
			}
		}
		mass[0] = max(mass[0], 1e-3) // the first value always has some
		tail := 0.0
		if r.IntN(2) == 0 {
			tail = 3 * r.Float64()
		}
		pm, pv := make([]float64, len(vals)+1), make([]float64, len(vals)+1)
		for k := range vals {
			pm[k+1] = pm[k] + mass[k]
			pv[k+1] = pv[k] + mass[k]*vals[k]
		}
		var grid []float64
		for a := 0.0; a < vals[len(vals)-1]; a = max(gittinsGridStart, a*gittinsGridFactor) {
			grid = append(grid, a)
		}
		got := gittinsRanks(vals, pm, pv, tail, grid)
		for g, a := range grid {
			i := sort.SearchFloat64s(vals, math.Nextafter(a, math.Inf(1)))
			want := gittinsRankOver(vals, pm, pv, pm[len(vals)]-pm[i]+tail, a, i, i, len(vals)-1)
			if !(math.Abs(got[g]-want) <= 1e-9*math.Abs(want)) && got[g] != want {
				t.Fatalf("case %d (%d values): rank at %g: hull %g, scan %g", c, len(vals), a, got[g], want)
			}
		}
	}
}

// Jobs that all need the same service: the rank is the work left, so it
// falls as a job runs (finish what was started; no sharing). A heavy tail:
// a job that outlived the short ones is ranked behind fresh ones (least
// attained service).
func TestGittinsRankShape(t *testing.T) {
	same := make([]float64, 50)
	for i := range same {
		same[i] = 36000
	}
	h, err := NewServiceHistory(same, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r0, r1 := h.Rank(0), h.Rank(20000); !(r1 < r0) || math.Abs(r0-36000) > 1e-6 {
		t.Errorf("equal jobs: rank at 0 %g (want 36000), at 20000 %g: want falling", r0, r1)
	}
	tail := make([]float64, 100)
	for i := range tail {
		tail[i] = 600
		if i%10 == 0 {
			tail[i] = 600000
		}
	}
	h, err = NewServiceHistory(tail, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r0, r1 := h.Rank(0), h.Rank(1000); !(r1 > 100*r0) {
		t.Errorf("heavy tail: rank at 0 %g, past the short jobs %g: want far behind", r0, r1)
	}
	if got := h.Rank(1e6); got != 1e6 {
		t.Errorf("past every finished job: rank %g, want the attained service 1e6", got)
	}
}

func TestServiceHistoryRejectsBadService(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want string
	}{
		{nil, "no finished jobs"},
		{[]float64{10, 0}, "finished job 1: service 0"},
		{[]float64{math.NaN()}, "finished job 0: service NaN"},
		{[]float64{math.Inf(1)}, "finished job 0: service +Inf"},
	} {
		if _, err := NewServiceHistory(tc.in, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

// NextChange is where the queue changes: the same queue just before it,
// another at it, and nowhere in between.
func TestServiceHistoryNextChange(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 2))
	cfg := DefaultConfig()
	for c := range 100 {
		s := make([]float64, 1+r.IntN(80))
		for i := range s {
			s[i] = 60 * math.Pow(10, 5*r.Float64())
		}
		h, err := NewServiceHistory(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		a := 0.0
		for step := 0; step < 200; step++ {
			q := cfg.gittinsOrder(h, a)
			next := h.NextChange(cfg, a)
			if !(next > a) {
				t.Fatalf("case %d: next change from %g is %g", c, a, next)
			}
			if math.IsInf(next, 1) {
				break
			}
			for _, f := range []float64{0.25, 0.5, 0.999999} {
				if x := a + f*(next-a); cfg.gittinsOrder(h, x) != q {
					t.Fatalf("case %d: queue changes at %g, before the next change %g from %g", c, x, next, a)
				}
			}
			if cfg.gittinsOrder(h, next) == q {
				t.Fatalf("case %d: queue %d at the next change %g from %g", c, q, next, a)
			}
			a = next
		}
	}
}

// With a history of equal long jobs the one closest to done goes first;
// by attained service it would be the one that ran least.
func TestDecideRanksByGittinsWithHistory(t *testing.T) {
	s := Snapshot{Capacity: jobs.Capacity{Nodes: nodes("n", 1, 1, v100)}}
	s.Jobs = append(s.Jobs,
		job("young", 1, 1, submitted(0), attained(7200)),
		job("old", 1, 1, submitted(time.Second), attained(30000)))
	if p := Decide(s, t0); workersOf(t, p, "young") != 1 {
		t.Fatalf("least attained service: young gets %d workers, want 1", workersOf(t, p, "young"))
	}
	same := make([]float64, MinServiceHistory)
	for i := range same {
		same[i] = 36000
	}
	h, err := NewServiceHistory(same, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Service = h
	p := Decide(s, t0)
	if err := checkPlan(s, p); err != nil {
		t.Fatal(err)
	}
	old, _ := p.Target("old")
	if old.Workers != 1 || !strings.Contains(old.Reason, "Gittins queue") {
		t.Errorf("Gittins: old gets %d workers (%s), want 1, ranked by its Gittins queue", old.Workers, old.Reason)
	}
	// Too short a history: least attained service again.
	short, _ := NewServiceHistory(same[:MinServiceHistory-1], nil)
	s.Service = short
	if p := Decide(s, t0); workersOf(t, p, "young") != 1 {
		t.Errorf("history of %d jobs: young gets %d workers, want 1 (least attained service)", short.Len(), workersOf(t, p, "young"))
	}
}

// Live jobs are censored observations (Kaplan-Meier): finished 100 and 200
// with a live job at 150 put 1/3 on 100 and 2/3 on 200 (the live job is as
// likely as the one at 200 to need 200), so the rank at 0 is
// min(100/(1/3), (100/3 + 400/3)/1) = 166.67 instead of 150 without it.
// A live job past every finished one leaves mass beyond them, which the
// finished jobs alone would not.
func TestServiceHistoryCensored(t *testing.T) {
	for _, tc := range []struct {
		finished, live []float64
		at, want       float64
	}{
		{[]float64{100, 200}, nil, 0, 150},
		{[]float64{100, 200}, []float64{150}, 0, 500.0 / 3},
		{[]float64{100, 200}, []float64{0, 0, 0}, 0, 150}, // waiting jobs say nothing
		// At risk at 0: 100, 200 and the live 1000: 1/3 each on 100
		// and 200, 1/3 beyond; quantum 200 spends 100/3 + 200*2/3 for
		// a 2/3 chance: 250.
		{[]float64{100, 200}, []float64{1000}, 0, 250},
		// Unsorted, and a live job at a finished value: the same masses
		// as sorted (1/3 on 100, 2/3 on 200), the caller's slices as given.
		{[]float64{200, 100}, []float64{100}, 0, 500.0 / 3},
	} {
		fin, live := slices.Clone(tc.finished), slices.Clone(tc.live)
		h, err := NewServiceHistory(tc.finished, tc.live)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fin, tc.finished) || !slices.Equal(live, tc.live) {
			t.Errorf("NewServiceHistory changed its arguments: %v %v, were %v %v", tc.finished, tc.live, fin, live)
		}
		if got := h.Rank(tc.at); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("finished %v, live %v: rank at %g = %g, want %g", tc.finished, tc.live, tc.at, got, tc.want)
		}
	}
	if _, err := NewServiceHistory([]float64{1}, []float64{-1}); err == nil || !strings.Contains(err.Error(), "live job 0: attained service -1") {
		t.Errorf("negative live service: error %v", err)
	}
}

// TestGittinsFirstQueueSizedToCluster: 450 GPU seconds per GPU within
// [1 h, 4 h]; idempotent (Decide applies ForCluster to a config the
// simulator already sized); off with GittinsFirstQueuePerGPU 0.
func TestGittinsFirstQueueSizedToCluster(t *testing.T) {
	for _, tc := range []struct {
		gpus int
		want float64
	}{{1, 3600}, {4, 3600}, {8, 3600}, {16, 7200}, {24, 10800}, {32, 14400}, {128, 14400}, {1000, 14400}} {
		c := DefaultConfig().ForCluster(tc.gpus)
		if c.firstQueue() != tc.want {
			t.Errorf("%d GPUs: first queue %g s, want %g", tc.gpus, c.firstQueue(), tc.want)
		}
		if again := c.ForCluster(tc.gpus).firstQueue(); again != tc.want {
			t.Errorf("%d GPUs: ForCluster twice: %g s, want %g", tc.gpus, again, tc.want)
		}
	}
	// Sized for 8 GPUs, then for 32: the second sizing starts from the
	// configured bounds, not from the first one's result.
	if got := DefaultConfig().ForCluster(8).ForCluster(32).firstQueue(); got != 14400 {
		t.Errorf("sized for 8 then 32 GPUs: first queue %g s, want 14400", got)
	}
	c := DefaultConfig()
	c.GittinsFirstQueuePerGPU = 0
	if got := c.ForCluster(8).firstQueue(); got != 14400 {
		t.Errorf("per GPU off: first queue %g s, want the absolute 14400", got)
	}
	c = DefaultConfig()
	c.GittinsFirstQueuePerGPU = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "gittins_first_queue_per_gpu") {
		t.Errorf("negative per-GPU bound: %v, want an error naming gittins_first_queue_per_gpu", err)
	}
	c = DefaultConfig()
	c.GittinsFirstQueueMin = 20000
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "gittins_first_queue_min") {
		t.Errorf("lower limit above the upper: %v, want an error naming gittins_first_queue_min", err)
	}
}

// BenchmarkServiceHistory: a history of 10,000 finished and 100 live jobs
// with Philly-like heavy-tailed service, built as a simulator does at every
// completion.
func BenchmarkServiceHistory(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	fin := make([]float64, 10000)
	for i := range fin {
		fin[i] = math.Round(60 * math.Pow(10, 5*r.Float64()))
	}
	slices.Sort(fin)
	live := make([]float64, 100)
	for i := range live {
		live[i] = math.Round(60 * math.Pow(10, 4*r.Float64()))
	}
	for b.Loop() {
		if _, err := NewServiceHistory(fin, live); err != nil {
			b.Fatal(err)
		}
	}
}
