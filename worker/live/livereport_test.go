package live

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/core"
)

// TestLiveReportRankZeroOnly: a report of rank 0 lands in the job's
// metric log with its step and epoch; another rank's is answered kept
// false and dropped; a bad report is an error naming what is wrong.
func TestLiveReportRankZeroOnly(t *testing.T) {
	r := testenv.NewRedis(t)
	g := &coord.Generation{Number: 3, Members: []string{"w0", "w1"}}
	worker := func(id string) *Worker {
		w := &Worker{ProgramWorker: &core.ProgramWorker{Cfg: core.Config{Job: "j1", Worker: id}}, g: g}
		w.met = core.NewMetricSink(r.Client, r.Prefix, "j1")
		return w
	}
	w0, w1 := worker("w0"), worker("w1")
	stop0, stop1 := w0.met.Start(func(err error) { t.Error(err) }), w1.met.Start(func(err error) { t.Error(err) })

	tests := []struct {
		w    *Worker
		req  liveRequest
		kept bool
		err  string
	}{
		{w0, liveRequest{Op: "report", Step: 40, Epoch: 1, Values: map[string]float64{"val_loss": 0.25, "loss": 0.5}}, true, ""},
		{w1, liveRequest{Op: "report", Step: 40, Epoch: 1, Values: map[string]float64{"val_loss": 9}}, false, ""},
		{w0, liveRequest{Op: "report", Step: 41}, false, "report: no values"},
		{w0, liveRequest{Op: "report", Step: -1, Values: map[string]float64{"loss": 1}}, false, "report: step -1"},
		{w0, liveRequest{Op: "report", Epoch: -2, Values: map[string]float64{"loss": 1}}, false, "report: epoch -2"},
		{w0, liveRequest{Op: "report", Values: map[string]float64{"": 1}}, false, `metric name ""`},
		{w0, liveRequest{Op: "report", Values: map[string]float64{strings.Repeat("x", 65): 1}}, false, "want 1-64 characters"},
		// A diverged value travels by name, and is kept as that value.
		{w0, liveRequest{Op: "report", Step: 42, Values: map[string]float64{"acc": 0.5}, NonFinite: map[string]string{"loss": "NaN"}}, true, ""},
		{w0, liveRequest{Op: "report", NonFinite: map[string]string{"loss": "nan"}}, false, `metric "loss": non-finite name "nan"`},
		{w0, liveRequest{Op: "report", Values: map[string]float64{"loss": 1}, NonFinite: map[string]string{"loss": "NaN"}}, false, "both in values and in non_finite"},
		{w0, liveRequest{Op: "report", NonFinite: map[string]string{"": "NaN"}}, false, `metric name ""`},
	}
	for i, tc := range tests {
		rep, after := tc.w.handle(context.Background(), tc.req)
		if after != nil {
			t.Fatalf("case %d: report ends the worker's life", i)
		}
		switch {
		case tc.err == "" && rep.Error != "":
			t.Errorf("case %d: error %q, want none", i, rep.Error)
		case tc.err != "" && !strings.Contains(rep.Error, tc.err):
			t.Errorf("case %d: error %q, want one saying %q", i, rep.Error, tc.err)
		case rep.Kept != tc.kept:
			t.Errorf("case %d: kept %v, want %v", i, rep.Kept, tc.kept)
		}
	}
	w0.g = nil // between generations: no rank, nothing kept
	if rep, _ := w0.handle(context.Background(), liveRequest{Op: "report", Values: map[string]float64{"loss": 1}}); rep.Kept || rep.Error != "" {
		t.Errorf("report outside a generation: %+v, want not kept and no error", rep)
	}
	stop0()
	stop1()
	pts, err := jobmetrics.New(r.Client, r.Prefix).Read(context.Background(), "j1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Step != 40 || pts[0].Epoch != 1 || pts[0].Values["val_loss"] != 0.25 || pts[0].Values["loss"] != 0.5 {
		t.Fatalf("metric log %+v, want rank 0's two points (step 40, epoch 1, val_loss 0.25, loss 0.5; step 42)", pts)
	}
	if p := pts[1]; p.Step != 42 || !math.IsNaN(p.Values["loss"]) || p.Values["acc"] != 0.5 {
		t.Fatalf("metric log's second point %+v, want step 42 with loss NaN and acc 0.5", p)
	}
}

// TestLiveProgramReportsMetrics: the example program under a live worker
// (real torch) reports its loss every step and a validation loss at each
// epoch's end (ctx.report, on_epoch_end); both are in the job's metric
// log, the last epoch's included (sent before the step that ends training).
func TestLiveProgramReportsMetrics(t *testing.T) {
	t.Parallel()
	const samples, batch, epochs = 480, 48, 2 // 2 partitions of 5 whole batches
	l := startLive(t, 1, 1, samples, 2, "--epochs", fmt.Sprint(epochs), "--batch", fmt.Sprint(batch), "--hidden", "32", "--report", "--val-samples", "96")
	l.add("w0")
	l.wait(90*time.Second, epochs)
	pts, err := jobmetrics.New(l.r.Client, l.r.Prefix).Read(context.Background(), "j1", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	perEpoch := samples / batch
	var steps []int64
	var val []jobmetrics.Point
	for _, p := range pts {
		if _, ok := p.Values["loss"]; ok {
			steps = append(steps, p.Step)
		}
		if _, ok := p.Values["val_loss"]; ok {
			val = append(val, p)
		}
	}
	if len(steps) != epochs*perEpoch || steps[0] != 0 || steps[len(steps)-1] != int64(epochs*perEpoch-1) {
		t.Errorf("loss points at steps %v, want 0..%d", steps, epochs*perEpoch-1)
	}
	if len(val) != epochs {
		t.Fatalf("val_loss points %+v, want %d (one per epoch)", val, epochs)
	}
	for i, p := range val {
		if p.Epoch != i+1 || p.Step != int64((i+1)*perEpoch-1) || !(p.Values["val_loss"] > 0) {
			t.Errorf("val_loss point %d: %+v, want epoch %d at step %d with a positive value", i, p, i+1, (i+1)*perEpoch-1)
		}
	}
}
