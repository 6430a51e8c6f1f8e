package dlsim

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

const testdata = "../../testdata/elasticflow"

func readEF(t *testing.T, trace, tables string) []Job {
	t.Helper()
	tb, err := ReadTables(os.DirFS(testdata), tables)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(testdata + "/" + trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	js, err := ReadElasticFlow(f, tb)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func runAll(t *testing.T, js []Job, gpus, perNode int, slot time.Duration) map[Policy]Result {
	t.Helper()
	out := map[Policy]Result{}
	for _, p := range Policies {
		o := DefaultOptions(p)
		o.GPUs, o.GPUsPerNode, o.Slot = gpus, perNode, slot
		r, err := Run(context.Background(), js, o)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.Met+r.Refused+r.Late != r.Jobs {
			t.Fatalf("%s: met %d + refused %d + late %d != %d jobs", p, r.Met, r.Refused, r.Late, r.Jobs)
		}
		out[p] = r
	}
	return out
}

// TestElasticFlowInputs runs every policy on ElasticFlow's two inputs: the
// deadline policy must reach ElasticFlow's own figure (0.728 at 64 T4;
// 1.00 for the generated trace at 128 A100), twice Tiresias', and no job it
// admitted may miss its deadline; deciding at every event and, as
// ElasticFlow's runs do, once per slot (60 s and 240 s).
func TestElasticFlowInputs(t *testing.T) {
	tests := []struct {
		trace, tables  string
		gpus, perNode  int
		jobs           int
		slot           time.Duration
		elasticFlowFig float64
	}{
		{"elasticVpollux_e.csv", "throughputs_T4", 64, 4, 195, 0, 0.728},
		{"elasticVpollux_e.csv", "throughputs_T4", 64, 4, 195, time.Minute, 0.728},
		{"100jobs_1500lam.csv", "throughputs_A100", 128, 8, 100, 0, 1.00},
		{"100jobs_1500lam.csv", "throughputs_A100", 128, 8, 100, 4 * time.Minute, 1.00},
	}
	for _, tt := range tests {
		t.Run(tt.trace+" slot "+tt.slot.String(), func(t *testing.T) {
			js := readEF(t, tt.trace, tt.tables)
			if len(js) != tt.jobs {
				t.Fatalf("%d jobs, want %d", len(js), tt.jobs)
			}
			rs := runAll(t, js, tt.gpus, tt.perNode, tt.slot)
			d := rs[Deadline]
			t.Logf("deadline %.3f, edf %.3f, tiresias %.3f, elastic %.3f", d.DeadlineMetRatio,
				rs[EDF].DeadlineMetRatio, rs[Tiresias].DeadlineMetRatio, rs[Elastic].DeadlineMetRatio)
			if d.DeadlineMetRatio < tt.elasticFlowFig-1e-9 {
				t.Errorf("deadline_met_ratio %.3f, ElasticFlow's %.3f", d.DeadlineMetRatio, tt.elasticFlowFig)
			}
			if ti := rs[Tiresias].DeadlineMetRatio; d.DeadlineMetRatio < min(2*ti, 1) {
				t.Errorf("deadline_met_ratio %.3f, under twice Tiresias' %.3f", d.DeadlineMetRatio, ti)
			}
			if d.AdmittedLate != 0 || d.Late != 0 {
				t.Errorf("%d admitted jobs finished late (%d late in all)", d.AdmittedLate, d.Late)
			}
		})
	}
}

// TestAdmittedStrictJobsMeetDeadlines: on an edl trace with drawn deadlines
// (tight ones included), under ElasticFlow's 60 s slot and with any size,
// every strict job the deadline policy admits finishes in time, and some
// are refused (the test would not see a broken guarantee otherwise).
func TestAdmittedStrictJobsMeetDeadlines(t *testing.T) {
	var rows []EDLRow
	for i := range 300 {
		rows = append(rows, EDLRow{ID: "j" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Submit: float64(i * 90),
			GPUs: 1 << (i % 4), Duration: float64(600 + (i*7919)%7200)})
	}
	js := FromEDLTrace(rows, DeadlineDraw{Min: 0.5, Max: 1.5, Seed: 3}, 2)
	for _, variant := range []struct {
		name    string
		slot    time.Duration
		anySize bool
	}{{"events", 0, false}, {"slot 60 s", time.Minute, false}, {"any size", 0, true}} {
		t.Run(variant.name, func(t *testing.T) {
			o := DefaultOptions(Deadline)
			o.GPUs, o.GPUsPerNode, o.Slot, o.AnySize = 16, 4, variant.slot, variant.anySize
			r, err := Run(context.Background(), js, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Refused == 0 || r.Met == 0 {
				t.Fatalf("refused %d, met %d: want both", r.Refused, r.Met)
			}
			if r.AdmittedLate != 0 {
				t.Errorf("%d admitted strict jobs missed their deadline (%+v)", r.AdmittedLate, r)
			}
		})
	}
}

func TestReadTables(t *testing.T) {
	fsys := fstest.MapFS{
		"m.csv":   {Data: []byte("global_batch_size,1,2,4\n64,1.5,nan,\n128,1,2,0\n")},
		"bad.txt": {Data: []byte("ignored")},
	}
	tb, err := ReadTables(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	if got := tb["m"][64]; len(got) != 1 || got[1] != 1.5 {
		t.Errorf("batch 64: %v, want only 1 GPU at 1.5", got)
	}
	if got := tb["m"][128]; len(got) != 2 || got[2] != 2 {
		t.Errorf("batch 128: %v, want 1 and 2 GPUs", got)
	}
	for name, data := range map[string]string{
		"header": "batch,1,2\n64,1,2\n",
		"column": "global_batch_size,1,x\n64,1,2\n",
		"batch":  "global_batch_size,1\nabc,1\n",
	} {
		if _, err := ReadTables(fstest.MapFS{"m.csv": {Data: []byte(data)}}, "."); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReadElasticFlowErrors(t *testing.T) {
	tb := Tables{"m": {64: {1: 2, 2: 3}}}
	good := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	js, err := ReadElasticFlow(strings.NewReader(good+"b,10,100,m,90,64,2,33\na,5,100,m,60,64,1,50\n"), tb)
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 2 || js[0].ID != "a" || js[1].Work != 100 || js[1].Deadline != 90 || js[1].Rate(2) != 3 {
		t.Errorf("jobs %+v", js)
	}
	for name, body := range map[string]string{
		"unknown model": good + "a,0,100,x,60,64,1,50\n",
		"unknown batch": good + "a,0,100,m,60,32,1,50\n",
		"size":          good + "a,0,100,m,60,64,4,50\n",
		"number":        good + "a,0,lots,m,60,64,1,50\n",
		"column":        "job_id,submit_time\na,0\n",
		"NaN deadline":  good + "a,0,100,m,NaN,64,1,50\n",
		"ddl first":     good + "a,100,100,m,60,64,1,50\n",
		"duplicate id":  good + "a,0,100,m,60,64,1,50\na,5,100,m,60,64,1,50\n",
		"huge size":     good + "a,0,100,m,60,64,1e300,50\n",
	} {
		if _, err := ReadElasticFlow(strings.NewReader(body), tb); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A bad row after blank lines is named by its line in the file (the
// reader counted records: line 3 here).
func TestReadElasticFlowNamesTheFilesLine(t *testing.T) {
	tb := Tables{"m": {64: {1: 2, 2: 3}}}
	body := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu\r\n\r\na,0,100,m,60,64,1\r\n\r\nb,0,lots,m,60,64,1\r\n"
	if _, err := ReadElasticFlow(strings.NewReader(body), tb); err == nil || !strings.HasPrefix(err.Error(), "read trace line 5: iteration ") {
		t.Errorf("err %v, want line 5's iteration named", err)
	}
	if _, err := ReadElasticFlow(strings.NewReader("job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu\n"), tb); err == nil || err.Error() != "read trace: no jobs" {
		t.Errorf("header only: %v", err)
	}
}

func TestFromEDLTraceDrawsDeadlines(t *testing.T) {
	rows := []EDLRow{{ID: "a", Submit: 0, GPUs: 2, Duration: 100}, {ID: "b", Submit: 10, GPUs: 1, Duration: 1000}}
	d := DeadlineDraw{Min: 0.5, Max: 1.5, Seed: 7}
	one, two := FromEDLTrace(rows, d, 2), FromEDLTrace(rows, d, 2)
	for i, j := range one {
		f := (j.Deadline - j.Submit) / rows[i].Duration
		if f < 0.5 || f > 1.5 || j.Deadline != two[i].Deadline {
			t.Errorf("job %s: deadline factor %g (again: %g)", j.ID, f, two[i].Deadline)
		}
		if got := j.Work / j.Rate(j.GPUs); math.Abs(got-rows[i].Duration) > 1e-6 {
			t.Errorf("job %s: %g s at its request, want %g", j.ID, got, rows[i].Duration)
		}
	}
	if other := FromEDLTrace(rows, DeadlineDraw{Min: 0.5, Max: 1.5, Seed: 8}, 2); other[1].Deadline == one[1].Deadline {
		t.Error("another seed draws the same deadline")
	}
}

func TestRate(t *testing.T) {
	j := Job{Speed: map[int]float64{1: 1, 4: 4, 8: 5}}
	for n, want := range map[int]float64{0: 0, 1: 1, 2: 2, 6: 4.5, 8: 5, 16: 5} {
		if got := j.Rate(n); math.Abs(got-want) > 1e-9 {
			t.Errorf("Rate(%d) = %g, want %g", n, got, want)
		}
	}
}

// A trace on another clock (ElasticFlow's starts at 3.7e6 s; Unix seconds
// are 1.7e9) runs as if it started at 0; one further out than the clock
// holds was a run that never ended, and is refused by name.
func TestRunCountsFromTheFirstArrival(t *testing.T) {
	tb := Tables{"m": {64: {1: 2, 2: 3}}}
	head := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	read := func(body string) []Job {
		js, err := ReadElasticFlow(strings.NewReader(head+body), tb)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	o := DefaultOptions(Deadline)
	o.GPUs, o.GPUsPerNode = 4, 4
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, err := Run(ctx, read("a,0,100,m,60,64,1,50\nb,5,300,m,200,64,2,50\n"), o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(ctx, read("a,1e11,100,m,100000000060,64,1,50\nb,100000000005,300,m,100000000200,64,2,50\n"), o)
	if err != nil {
		t.Fatal(err)
	}
	if got.Met != want.Met || got.Met == 0 || got.Utilisation != want.Utilisation {
		t.Errorf("shifted by 1e11 s: met %d, utilisation %g; from 0: %d, %g", got.Met, got.Utilisation, want.Met, want.Utilisation)
	}
	if _, err := Run(ctx, read("a,0,100,m,60,64,1,50\nb,1e12,300,m,1e12,64,2,50\n"), o); err == nil || !strings.Contains(err.Error(), "job b arrives") {
		t.Errorf("1e12 s apart: %v, want the span refused", err)
	}
}

// A run whose last arrivals are all refused ends there: it reported
// "stuck ... with 0 jobs waiting and none running" (Philly VC 103959 at
// --slot-s 300, whose last job, 16 s long, is due before the slot it
// arrives in), for every policy run after it too.
func TestRunEndsWhenTheLastArrivalsAreRefused(t *testing.T) {
	tb := Tables{"m": {64: {1: 1, 2: 2}}}
	head := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	for _, tt := range []struct {
		name, body   string
		slot         time.Duration
		met, refused int
	}{
		// b needs 1000 s at 2 GPUs and is due in 10: refused at arrival.
		{"events", "a,0,100,m,200,64,1,100\nb,50,2000,m,60,64,2,1000\n", 0, 1, 1},
		// b arrives at 290 s, is looked at in the slot at 300 s, due at 295.
		{"slot", "a,0,100,m,200,64,1,100\nb,290,1,m,295,64,1,1\n", 300 * time.Second, 1, 1},
		// The only job, refused.
		{"only job", "b,0,2000,m,10,64,2,1000\n", 0, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			js, err := ReadElasticFlow(strings.NewReader(head+tt.body), tb)
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultOptions(Deadline)
			o.GPUs, o.GPUsPerNode, o.Slot = 2, 2, tt.slot
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := Run(ctx, js, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Met != tt.met || r.Refused != tt.refused || r.Late != 0 {
				t.Errorf("met %d, refused %d, late %d; want %d, %d, 0", r.Met, r.Refused, r.Late, tt.met, tt.refused)
			}
		})
	}
}

// With a slot, decisions fall at multiples of it on the trace's own clock,
// as ElasticFlow's simulator makes them, wherever the first arrival falls:
// counting from the first arrival moved the slots of ElasticFlow's trace
// (first arrival 3,715,485 s) by 45 s and its deadline_met_ratio at
// --slot-s 60 from the published 0.831 to 0.810.
func TestSlotsFallOnTheTracesClock(t *testing.T) {
	tb := Tables{"m": {64: {1: 1, 2: 2}}}
	head := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	// Slot 60 s. a arrives at 30 and is decided at 60: due at 45, it is
	// refused. b arrives at 50, is decided at 60 and needs 30.3 s: due at
	// 95, it is met (decided 60 s after the first arrival, at 90, it was
	// refused). c, the same as b 1e6 slots later, likewise.
	body := "a,30,10,m,45,64,1,10\nb,50,30,m,95,64,1,30\nc,60000050,30,m,60000095,64,1,30\n"
	js, err := ReadElasticFlow(strings.NewReader(head+body), tb)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions(Deadline)
	o.GPUs, o.GPUsPerNode, o.Slot = 2, 2, time.Minute
	r, err := Run(context.Background(), js, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Met != 2 || r.Refused != 1 || r.Late != 0 {
		t.Errorf("met %d, refused %d, late %d; want 2 (b, c), 1 (a), 0", r.Met, r.Refused, r.Late)
	}
}

// A row that cannot run says which of its fields is at fault: it said
// "1 GPUs (not a size of its table), 0 iterations" for 0 iterations at a
// size the table has.
func TestReadElasticFlowSaysWhyARowCannotRun(t *testing.T) {
	tb := Tables{"m": {64: {1: 2, 2: 3}}}
	good := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	for body, want := range map[string]string{
		good + "a,0,0,m,60,64,1,50\n":   "job a: iteration 0: want a positive number of iterations",
		good + "a,0,100,m,60,64,4,50\n": "job a: num_gpu 4: not a size of its throughput table (1, 2)",
		good + "a,0,100,m,60,64,0,50\n": "job a: num_gpu 0: not a size of its throughput table (1, 2)",
	} {
		_, err := ReadElasticFlow(strings.NewReader(body), tb)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "GPUs (not") {
			t.Errorf("%q: %v, want %q", body[len(good):], err, want)
		}
	}
}

// Utilisation is a share of the cluster: 200 jobs all at t = 0 on 8 GPUs
// kept the cluster full, and the elastic run printed gpu_utilisation
// 1.000000000000003 (the GPU seconds summed step by step round up).
func TestUtilisationNeverAboveOne(t *testing.T) {
	var rows []EDLRow
	for i := range 200 {
		rows = append(rows, EDLRow{ID: fmt.Sprint(i), GPUs: 1 + i%4, Duration: float64(100 + i*37%900), BestEffort: i%5 == 0})
	}
	js := FromEDLTrace(rows, DeadlineDraw{Min: 0.5, Max: 1.5, Seed: 1}, 2)
	for _, p := range []Policy{Deadline, EDF, Tiresias, Elastic} {
		o := DefaultOptions(p)
		o.GPUs, o.GPUsPerNode = 8, 8
		r, err := Run(context.Background(), js, o)
		if err != nil {
			t.Fatal(err)
		}
		if !(r.Utilisation > 0 && r.Utilisation <= 1) || r.MakespanS <= 0 {
			t.Errorf("%s: utilisation %v, makespan %g", p, r.Utilisation, r.MakespanS)
		}
	}
}
