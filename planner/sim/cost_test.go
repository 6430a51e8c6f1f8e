package sim

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// --load 2 halves every submit time: on one GPU under FIFO the second job
// arrives at 50 s instead of 100 s and waits 50 s for the first.
func TestRunLoadDividesSubmitTimes(t *testing.T) {
	tr := []TraceJob{{ID: "a", Submit: 0, GPUs: 1, Duration: 100}, {ID: "b", Submit: 100, GPUs: 1, Duration: 100}}
	for _, tc := range []struct {
		load            float64
		avg, queue, mks float64
	}{{load: 1, avg: 100, queue: 0, mks: 200}, {load: 2, avg: 125, queue: 25, mks: 200}, {load: 0.5, avg: 100, queue: 0, mks: 300}} {
		o := DefaultOptions(FIFO)
		o.GPUs, o.Load = 1, tc.load
		r, err := Run(context.Background(), tr, o)
		if err != nil {
			t.Fatal(err)
		}
		if r.AvgJCT != tc.avg || r.AvgQueue != tc.queue || r.Makespan != tc.mks || r.Load != tc.load {
			t.Errorf("load %g: %+v, want avg %g, queue %g, makespan %g", tc.load, r, tc.avg, tc.queue, tc.mks)
		}
	}
	o := DefaultOptions(FIFO)
	o.Load = -1
	if _, err := Run(context.Background(), tr, o); err == nil || !strings.Contains(err.Error(), "load -1") {
		t.Errorf("err %v, want the load named", err)
	}
}

// A job checkpoints every period of running; a rollback returns it to the
// last checkpoint, a suspension saves first.
func TestJobCheckpointRollback(t *testing.T) {
	j := &job{t: TraceJob{ID: "j", GPUs: 1, Duration: 1000}, measured: map[int]float64{}, workers: 1}
	j.model.Alpha, j.model.Beta = 1, 0.01
	j.rateAtRq = j.model.Throughput(1)
	j.advance(250, 100)
	if j.done != 250 || j.ckptDone != 200 || j.sinceCkpt != 50 {
		t.Fatalf("after 250 s: done %g, checkpoint %g, since %g; want 250, 200, 50", j.done, j.ckptDone, j.sinceCkpt)
	}
	j.stall = 30
	j.advance(80, 100) // 30 s stalled, 50 s run: a checkpoint at 300
	if j.done != 300 || j.ckptDone != 300 || j.sinceCkpt != 0 {
		t.Fatalf("after the stall: done %g, checkpoint %g, since %g; want 300, 300, 0", j.done, j.ckptDone, j.sinceCkpt)
	}
	j.advance(40, 100)
	j.rollback()
	if j.done != 300 {
		t.Errorf("rollback: done %g, want 300", j.done)
	}
	j.advance(40, 100)
	j.checkpoint()
	if j.ckptDone != 340 {
		t.Errorf("checkpoint on suspend: %g, want 340", j.ckptDone)
	}
	j.advance(30, 0) // no period: nothing to lose
	j.rollback()
	if j.done != 370 {
		t.Errorf("rollback without a checkpoint period: done %g, want 370", j.done)
	}
}

// An opportunistic job harvests a node; a guaranteed job arrives that needs
// the whole node. The harvester is suspended and the GPUs are free after
// its leave: 14 ms stop-free, 16 s for a torchrun-style restart. The
// restart-style shrink of a running job also loses its progress since the
// last checkpoint.
func TestRunGiveback(t *testing.T) {
	tr := []TraceJob{
		{ID: "opp", Submit: 0, GPUs: 4, Duration: 3600, Priority: jobs.Opportunistic},
		{ID: "g", Submit: 100, GPUs: 8, Duration: 100, Priority: jobs.Guaranteed},
	}
	for _, tc := range []struct {
		p    Policy
		want float64
	}{{Elastic, 0.014}, {ElasticRestart, 16}, {Tiresias, 16}} {
		o := DefaultOptions(tc.p)
		o.GPUs, o.MaxFactor = 8, 1
		r, err := Run(context.Background(), tr, o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Givebacks != 1 || math.Abs(r.GivebackS-tc.want) > 1e-9 || r.OppJobs != 1 {
			t.Errorf("%s: %d give-backs of %g s (%d opportunistic jobs), want 1 of %g s", tc.p, r.Givebacks, r.GivebackS, r.OppJobs, tc.want)
		}
	}
}

// Two jobs contend and the first is shrunk to make room: a stop-free shrink
// costs it 14 ms; a restart costs 16 s and the 10 s it ran since its last
// checkpoint.
func TestRunResizeCosts(t *testing.T) {
	tr := []TraceJob{{ID: "a", Submit: 0, GPUs: 8, Duration: 1000}, {ID: "b", Submit: 10, GPUs: 8, Duration: 100}}
	res := map[Policy]Result{}
	for _, p := range []Policy{Elastic, ElasticRestart} {
		o := DefaultOptions(p)
		o.GPUs, o.MaxFactor = 8, 1
		r, err := Run(context.Background(), tr, o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Resizes == 0 {
			t.Fatalf("%s: no resizes: %+v", p, r)
		}
		res[p] = r
	}
	if d := res[ElasticRestart].Makespan - res[Elastic].Makespan; d < 16+10-1 {
		t.Errorf("restart makespan %.1f s, stop-free %.1f s: want the restart at least 16 s + 10 s lost later", res[ElasticRestart].Makespan, res[Elastic].Makespan)
	}
	o := DefaultOptions(Elastic)
	if c := o.costs(); c != StopFreeCosts {
		t.Errorf("elastic costs %+v, want %+v", c, StopFreeCosts)
	}
	o.Policy = ElasticRestart
	if got, want := o.plannerResizeCost(), (3800*time.Millisecond+16*time.Second)/2+5*time.Minute; got != want {
		t.Errorf("planner resize cost %s, want %s", got, want)
	}
	o.ResizeCost = 2 * time.Second
	if c := o.costs(); c.Join != 2*time.Second || c.Leave != 2*time.Second || !c.Rollback {
		t.Errorf("--resize-cost-s 2: %+v", c)
	}
}

func TestGenerate(t *testing.T) {
	g := DefaultGenOptions()
	a, b := Generate(g), Generate(g)
	var x, y bytes.Buffer
	if err := WriteTraceCSV(&x, a); err != nil {
		t.Fatal(err)
	}
	if err := WriteTraceCSV(&y, b); err != nil {
		t.Fatal(err)
	}
	if x.String() != y.String() {
		t.Fatal("the same options gave different traces")
	}
	back, err := ReadTrace(strings.NewReader(x.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != g.Jobs || back[0].Submit != 0 {
		t.Fatalf("read back %d jobs, first at %g", len(back), back[0].Submit)
	}
	var opp, small, short, huge int
	var gpuTime float64
	for _, j := range back {
		if j.GPUs > g.GPUs || j.Duration < 60 {
			t.Fatalf("job %+v outside the generator's bounds", j)
		}
		if j.Priority == jobs.Opportunistic {
			opp++
		}
		if j.GPUs <= 2 {
			small++
		}
		if j.Duration < 3600 {
			short++
		}
		if j.GPUs >= 32 {
			huge++
		}
		gpuTime += float64(j.GPUs) * j.Duration
	}
	n := float64(g.Jobs)
	if f := float64(opp) / n; f < 0.06 || f > 0.14 {
		t.Errorf("opportunistic share %.3f, want about %.2f", f, g.OpportunisticFrac)
	}
	if float64(small)/n < 0.7 || float64(short)/n < 0.6 || huge == 0 {
		t.Errorf("%d small, %d short, %d huge jobs of %d: want many small and short, a few huge", small, short, huge, g.Jobs)
	}
	// Offered load: GPU time over span and cluster, within the noise of
	// the arrival process.
	if l := gpuTime / (back[len(back)-1].Submit * float64(g.GPUs)); l < 0.5*g.OfferedLoad || l > 2*g.OfferedLoad {
		t.Errorf("offered load %.2f, want about %.2f", l, g.OfferedLoad)
	}
	g2 := g
	g2.Seed++
	if c := Generate(g2); c[0] == a[0] && c[1] == a[1] && c[2] == a[2] {
		t.Error("another seed gave the same jobs")
	}
	bad := GenOptions{Jobs: 0, GPUs: -1, OfferedLoad: 0, OpportunisticFrac: 2}
	err = bad.Validate()
	for _, want := range []string{"jobs 0", "gpus -1", "offered_load 0", "opportunistic 2"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
}

// The committed synthetic trace is what `edl sim gen` with the default
// options writes.
func TestSyntheticTraceIsRegenerable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTraceCSV(&buf, Generate(DefaultGenOptions())); err != nil {
		t.Fatal(err)
	}
	want, err := readFile(syntheticTrace)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != want {
		t.Errorf("%s differs from Generate(DefaultGenOptions()): regenerate it with 'edl sim gen --out %s'", syntheticTrace, syntheticTrace)
	}
}

func TestLoadTableAndPlot(t *testing.T) {
	rs := []Result{
		{Policy: Tiresias, Load: 1, AvgJCT: 100}, {Policy: Elastic, Load: 1, AvgJCT: 60},
		{Policy: Tiresias, Load: 2, AvgJCT: 300}, {Policy: Elastic, Load: 2, AvgJCT: 150, OppJobs: 1, OppAvgJCT: 7200, Givebacks: 2, GivebackS: 0.014},
	}
	var tab, md bytes.Buffer
	if err := WriteTable(&tab, rs); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(tab.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[2], "0.60") || !strings.Contains(lines[4], "0.50") || !strings.Contains(lines[4], "0.014") {
		t.Errorf("table: want ratios vs tiresias at the same load:\n%s", tab.String())
	}
	if !strings.Contains(md.String(), "| 2 | elastic | 0.04 |") {
		t.Errorf("markdown:\n%s", md.String())
	}
	var buf bytes.Buffer
	if err := WriteLoadPlot(&buf, "test", rs); err != nil {
		t.Fatal(err)
	}
	if img, err := png.Decode(&buf); err != nil || img.Bounds().Dx() < 600 {
		t.Errorf("plot: %v", err)
	}
}

// Worker failures at one per GPU-day on a 10-day one-GPU job: the
// stop-free policy loses 0.6 s each, a restart 4.1 s and the progress
// since the last checkpoint; the failure times are reproducible.
func TestRunFailures(t *testing.T) {
	tr := []TraceJob{{ID: "long", GPUs: 1, Duration: 10 * 86400}}
	res := map[Policy]Result{}
	for _, p := range []Policy{Elastic, ElasticRestart} {
		o := DefaultOptions(p)
		o.GPUs, o.MaxFactor, o.FailuresPerGPUDay = 1, 1, 1
		r, err := Run(context.Background(), tr, o)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Run(context.Background(), tr, o)
		if r.Failures < 3 || again.Failures != r.Failures || again.AvgJCT != r.AvgJCT {
			t.Fatalf("%s: %d failures (rerun %d), JCT %g (rerun %g): want several, reproducible", p, r.Failures, again.Failures, r.AvgJCT, again.AvgJCT)
		}
		res[p] = r
	}
	el, rs := res[Elastic], res[ElasticRestart]
	if got, want := el.AvgJCT-tr[0].Duration, 0.6*float64(el.Failures); math.Abs(got-want) > 1e-3 {
		t.Errorf("elastic lost %g s to %d failures, want %g", got, el.Failures, want)
	}
	if rs.AvgJCT-tr[0].Duration < 4.1*float64(rs.Failures)+60 {
		t.Errorf("restart lost %g s to %d failures: want 4.1 s each plus checkpoint rollbacks", rs.AvgJCT-tr[0].Duration, rs.Failures)
	}
	o := DefaultOptions(Elastic)
	o.FailuresPerGPUDay = -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "failures_per_gpu_day") {
		t.Errorf("Validate() = %v, want failures_per_gpu_day named", err)
	}
}
