package sim

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

const (
	phillyTrace    = "../../testdata/traces/philly_vc_ee9e8c.csv"
	syntheticTrace = "../../testdata/traces/synthetic_mix_s1.csv"
)

func readPhilly(t *testing.T, n int) []TraceJob {
	t.Helper()
	f, err := os.Open(phillyTrace)
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	defer f.Close()
	tr, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr[:min(n, len(tr))]
}

func TestReadTrace(t *testing.T) {
	tests := []struct {
		name, csv, err string
		want           []TraceJob
	}{
		{name: "sorted by submission", csv: "job_id,submit_s,num_gpus,duration_s,vc\nb,10,2,100,x\na,5,1,50,y\n",
			want: []TraceJob{{ID: "a", Tenant: "y", Submit: 5, GPUs: 1, Duration: 50, Priority: jobs.Guaranteed}, {ID: "b", Tenant: "x", Submit: 10, GPUs: 2, Duration: 100, Priority: jobs.Guaranteed}}},
		{name: "no vc column: default tenant", csv: "num_gpus,job_id,duration_s,submit_s\n4,a,9,0\n",
			want: []TraceJob{{ID: "a", Tenant: "default", GPUs: 4, Duration: 9, Priority: jobs.Guaranteed}}},
		{name: "priority and tenant columns, extra columns ignored", csv: "job_id,submit_s,num_gpus,duration_s,tenant,priority,note\na,0,2,10,nlp,opportunistic,x\nb,1,1,5,,,y\n",
			want: []TraceJob{{ID: "a", Tenant: "nlp", GPUs: 2, Duration: 10, Priority: jobs.Opportunistic}, {ID: "b", Tenant: "default", Submit: 1, GPUs: 1, Duration: 5, Priority: jobs.Guaranteed}}},
		{name: "unknown priority", csv: "job_id,submit_s,num_gpus,duration_s,priority\na,0,1,5,urgent\n", err: `priority "urgent"`},
		{name: "duplicate job", csv: "job_id,submit_s,num_gpus,duration_s\na,0,1,5\na,1,1,5\n", err: `job_id "a" already on line 2`},
		// Blank lines are skipped: the lines named are the file's.
		{name: "duplicate after a blank line", csv: "job_id,submit_s,num_gpus,duration_s\n\na,0,1,5\n\na,1,1,5\n", err: `line 5: job_id "a" already on line 3`},
		{name: "empty job id", csv: "job_id,submit_s,num_gpus,duration_s\n,0,1,5\n", err: "empty job_id"},
		{name: "missing column", csv: "job_id,submit_s,num_gpus\na,0,1\n", err: `no column "duration_s"`},
		{name: "zero GPUs", csv: "job_id,submit_s,num_gpus,duration_s\na,0,0,5\n", err: "num_gpus"},
		{name: "bad duration", csv: "job_id,submit_s,num_gpus,duration_s\na,0,1,-5\n", err: "duration_s"},
		{name: "empty", csv: "job_id,submit_s,num_gpus,duration_s\n", err: "no jobs"},
		// NaN passed "< 0" and "<= 0" and ran the simulator forever.
		{name: "NaN duration", csv: "job_id,submit_s,num_gpus,duration_s\na,0,1,NaN\n", err: `duration_s "NaN": not a finite`},
		{name: "infinite submit", csv: "job_id,submit_s,num_gpus,duration_s\na,+Inf,1,5\n", err: `submit_s "+Inf": not a finite`},
		{name: "byte-order mark and spaces", csv: "\ufeffjob_id,submit_s,num_gpus,duration_s\r\na, 3 , 2 ,7\r\n",
			want: []TraceJob{{ID: "a", Tenant: "default", Submit: 3, GPUs: 2, Duration: 7, Priority: jobs.Guaranteed}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadTrace(strings.NewReader(tc.csv))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Hand-checked: one 4-GPU job of 100 s alone on 8 GPUs. FIFO runs it at 4
// for 100 s; elastic starts it at its max of 8, which the scaling model
// makes faster than at 4.
func TestRunSingleJob(t *testing.T) {
	tr := []TraceJob{{ID: "j", Tenant: "t", Submit: 0, GPUs: 4, Duration: 100}}
	o := DefaultOptions(FIFO)
	o.GPUs = 8
	r, err := Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.AvgJCT != 100 || r.Makespan != 100 || r.GPUUtil != 0.5 || r.Resizes != 0 {
		t.Errorf("fifo: %+v, want JCT 100, makespan 100, util 0.5, no resizes", r)
	}
	o.Policy = Elastic
	r, err = Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	k := commRatio("j")
	want := 100 * (4 / (1 + 3*k)) / (8 / (1 + 7*k))
	if math.Abs(r.AvgJCT-want) > 1e-6 || r.GPUUtil != 1 {
		t.Errorf("elastic: JCT %g util %g, want %g and 1", r.AvgJCT, r.GPUUtil, want)
	}
}

// Two jobs contend: FIFO makes the second wait; elastic shrinks the first
// (paying one resize) so both run at once.
func TestRunContention(t *testing.T) {
	tr := []TraceJob{{ID: "a", Submit: 0, GPUs: 8, Duration: 1000}, {ID: "b", Submit: 10, GPUs: 8, Duration: 100}}
	o := DefaultOptions(FIFO)
	o.GPUs = 8
	fifo, err := Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if fifo.AvgQueue != 495 { // b waits 990 s
		t.Errorf("fifo avg queue %g, want 495", fifo.AvgQueue)
	}
	o.Policy = Elastic
	el, err := Run(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	if el.AvgQueue != 0 || el.Resizes == 0 || el.AvgJCT >= fifo.AvgJCT {
		t.Errorf("elastic %+v vs fifo %+v: want no queueing, some resizes, lower JCT", el, fifo)
	}
}

func TestRunRejectsJobLargerThanCluster(t *testing.T) {
	o := DefaultOptions(Elastic)
	o.GPUs = 4
	_, err := Run(context.Background(), []TraceJob{{ID: "a", GPUs: 8, Duration: 1}}, o)
	if err == nil || !strings.Contains(err.Error(), "asks for 8 GPUs") {
		t.Errorf("err %v, want the job named", err)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, []TraceJob{{ID: "a", GPUs: 1, Duration: 1}}, DefaultOptions(Elastic))
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("err %v, want context canceled", err)
	}
}

// On the first 400 jobs of the Philly trace the policies rank as the
// design says: elastic beats Tiresias beats strict FIFO on average JCT,
// every job finishes, and runs are reproducible.
func TestPhillyPrefixRanking(t *testing.T) {
	tr := readPhilly(t, 400)
	res := map[Policy]Result{}
	for _, p := range Policies {
		r, err := Run(context.Background(), tr, DefaultOptions(p))
		if err != nil {
			t.Fatal(err)
		}
		if r.Jobs != len(tr) || r.GPUUtil <= 0 || r.GPUUtil > 1 {
			t.Errorf("%s: %+v", p, r)
		}
		res[p] = r
	}
	if !(res[Elastic].AvgJCT < res[Tiresias].AvgJCT && res[Tiresias].AvgJCT < res[FIFO].AvgJCT) {
		t.Errorf("avg JCT: elastic %.0f, tiresias %.0f, fifo %.0f: want that order", res[Elastic].AvgJCT, res[Tiresias].AvgJCT, res[FIFO].AvgJCT)
	}
	again, _ := Run(context.Background(), tr, DefaultOptions(Elastic))
	if again.AvgJCT != res[Elastic].AvgJCT || again.Resizes != res[Elastic].Resizes {
		t.Errorf("rerun differs: %+v vs %+v", again, res[Elastic])
	}
	var buf bytes.Buffer
	if err := WriteJCTPlot(&buf, "test", []Result{res[FIFO], res[Elastic]}); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil || img.Bounds().Dx() < 600 {
		t.Errorf("plot: %v, %v", err, img)
	}
	var tab bytes.Buffer
	if err := WriteTable(&tab, []Result{res[FIFO], res[Elastic]}); err != nil || !strings.Contains(tab.String(), "elastic") {
		t.Errorf("table: %v\n%s", err, tab.String())
	}
}

// Under overload the legacy policy loses to Tiresias (on the synthetic
// trace at load 2: every guaranteed job grows before an opportunistic job
// starts, and the low queue shares GPUs among long jobs), and the policy of
// the current policy puts elastic well ahead. The first check failed before the
// change (legacy elastic 1.33x Tiresias here).
func TestSyntheticLoadRanking(t *testing.T) {
	f, err := os.Open(syntheticTrace)
	if err != nil {
		t.Fatalf("trace: %v", err)
	}
	defer f.Close()
	tr, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	run := func(p Policy, legacy bool) Result {
		o := DefaultOptions(p)
		o.GPUs, o.Load, o.LegacyPolicy = 64, 2, legacy
		r, err := Run(context.Background(), tr, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tir, el, old := run(Tiresias, false), run(Elastic, false), run(Elastic, true)
	t.Logf("load 2: tiresias %.2f h, elastic %.2f h, legacy elastic %.2f h", tir.AvgJCT/3600, el.AvgJCT/3600, old.AvgJCT/3600)
	if el.AvgJCT > 0.75*tir.AvgJCT {
		t.Errorf("elastic avg JCT %.2f h, want <= 0.75x tiresias' %.2f h", el.AvgJCT/3600, tir.AvgJCT/3600)
	}
	if el.P95JCT > tir.P95JCT {
		t.Errorf("elastic p95 %.2f h, want <= tiresias' %.2f h", el.P95JCT/3600, tir.P95JCT/3600)
	}
	if old.AvgJCT < el.AvgJCT {
		t.Errorf("legacy policy %.2f h beats the new one %.2f h", old.AvgJCT/3600, el.AvgJCT/3600)
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// A trace in Unix seconds ran, but one further out than time.Duration holds
// (or a tiny --load stretching it there) never ended: times now count from
// the first arrival, and a span the clock cannot hold is refused by name.
func TestRunCountsFromTheFirstArrival(t *testing.T) {
	rel := []TraceJob{{ID: "a", Tenant: "t", Submit: 0, GPUs: 2, Duration: 100}, {ID: "b", Tenant: "t", Submit: 50, GPUs: 4, Duration: 3600}}
	abs := []TraceJob{{ID: "a", Tenant: "t", Submit: 1e11, GPUs: 2, Duration: 100}, {ID: "b", Tenant: "t", Submit: 1e11 + 50, GPUs: 4, Duration: 3600}}
	o := DefaultOptions(Elastic)
	o.GPUs = 8
	want, err := Run(context.Background(), rel, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := Run(ctx, abs, o)
	if err != nil {
		t.Fatal(err)
	}
	if got.AvgJCT != want.AvgJCT || got.Makespan != want.Makespan {
		t.Errorf("shifted by 1e11 s: avg JCT %g, makespan %g; from 0: %g, %g", got.AvgJCT, got.Makespan, want.AvgJCT, want.Makespan)
	}
	o.Load = 1e-300
	if _, err := Run(ctx, rel, o); err == nil || !strings.Contains(err.Error(), "job b arrives") {
		t.Errorf("load 1e-300: %v, want the span refused", err)
	}
	o.Load = 1
	long := []TraceJob{{ID: "a", Tenant: "t", GPUs: 1, Duration: 1e300}}
	if _, err := Run(ctx, long, o); err == nil || !strings.Contains(err.Error(), "job a runs") {
		t.Errorf("duration 1e300: %v, want it refused", err)
	}
}

// Arrivals closer than the clock's resolution (eps) were taken in at the
// earliest one's time: a job could then finish before it was submitted
// (negative JCTs, a negative average queue).
func TestNoJobFinishesBeforeItsSubmission(t *testing.T) {
	var tr []TraceJob
	for i := range 40 {
		tr = append(tr, TraceJob{ID: fmt.Sprintf("j%02d", i), Tenant: "default", Submit: float64(i) * 1e-7, GPUs: 1 + i%3, Duration: 1e-7 * float64(1+i%5), Priority: jobs.Guaranteed})
	}
	for _, p := range Policies {
		o := DefaultOptions(p)
		o.GPUs = 3
		r, err := Run(context.Background(), tr, o)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.JCTs[0] < 0 || r.AvgQueue < 0 || r.AvgJCT < r.IdealAvgJCT {
			t.Errorf("%s: shortest JCT %g s, average %g s (ideal %g s), average queue %g s", p, r.JCTs[0], r.AvgJCT, r.IdealAvgJCT, r.AvgQueue)
		}
	}
}

// A trace the simulator takes in (every job arrives and runs within its
// 31-year clock) runs to its end: a job of 10^9 s, and two of 4x10^8 s
// one after the other, once failed as "stuck ... with 1 jobs waiting and
// none running" while the job ran, because the run stopped ten years
// after the last arrival.
func TestRunLongJobsWithinTheClock(t *testing.T) {
	for _, c := range []struct {
		name string
		tr   []TraceJob
		want float64 // makespan under fifo
	}{
		{"one job of 1e9 s", []TraceJob{{ID: "a", GPUs: 8, Duration: 1e9}}, 1e9},
		{"two of 4e8 s in a row", []TraceJob{{ID: "a", GPUs: 8, Duration: 4e8}, {ID: "b", GPUs: 8, Duration: 4e8}}, 8e8},
	} {
		for _, p := range []Policy{FIFO, Elastic} {
			o := DefaultOptions(p)
			o.GPUs = 8
			r, err := Run(context.Background(), c.tr, o)
			if err != nil {
				t.Errorf("%s, %s: %v", c.name, p, err)
				continue
			}
			if p == FIFO && math.Abs(r.Makespan-c.want) > 1 {
				t.Errorf("%s, %s: makespan %g, want %g", c.name, p, r.Makespan, c.want)
			}
			if !(r.GPUUtil > 0 && r.GPUUtil <= 1+1e-9) {
				t.Errorf("%s, %s: gpu_util %g", c.name, p, r.GPUUtil)
			}
		}
	}
}
