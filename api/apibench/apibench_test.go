package apibench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestRunMeasuresEveryPhase(t *testing.T) {
	r := testenv.NewRedis(t)
	spec, err := os.ReadFile("../../examples/job.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Redis: r.Client, Prefix: r.Prefix, Clients: 4, Duration: 200 * time.Millisecond, Spec: spec,
		SubmitRate: 200, GetRate: 400, OpenWorkers: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Submits == 0 || res.SubmitPerS <= 0 || res.GetPerS <= 0 || res.ListPerS <= 0 ||
		res.SubmitP99Ms < res.SubmitP50Ms || res.GetP99Ms <= 0 ||
		res.SubmitsOpen != 40 || res.SubmitOpenPerS <= 0 || res.SubmitOpenP99Ms < res.SubmitOpenP50Ms ||
		res.GetOpenPerS <= 0 || res.GetOpenP99Ms < res.GetOpenP50Ms || res.GetOpenP50Ms <= 0 {
		t.Errorf("result %+v", res)
	}
	n, err := r.Client.ZCard(context.Background(), r.Prefix+"tenant:bench:jobs").Result()
	if err != nil || int(n) != res.Submits+res.SubmitsOpen {
		t.Errorf("%d jobs stored, %d+%d submits counted (%v)", n, res.Submits, res.SubmitsOpen, err)
	}
	if _, err := Run(context.Background(), Config{Redis: r.Client, Spec: []byte(`{}`)}); err == nil {
		t.Error("invalid spec accepted")
	}
}

// An open loop charges queueing to the requests that waited: one worker
// taking 2 ms per request cannot keep up with 1,000/s, so the last of 50
// requests (due at 49 ms, answered no sooner than 100 ms) waited >= 51 ms,
// though no single request took more than a few ms to serve.
func TestOpenPhaseCountsQueueing(t *testing.T) {
	n, rate, lat := openPhase(context.Background(), 1000, 1, 50*time.Millisecond, func(*worker) { time.Sleep(2 * time.Millisecond) })
	if n != 50 || len(lat) != 50 || rate <= 0 {
		t.Fatalf("n=%d rate=%v lats=%d", n, rate, len(lat))
	}
	if worst := lat[len(lat)-1]; worst < 51*time.Millisecond {
		t.Errorf("worst latency %v: queueing not counted", worst)
	}
}

func TestPct(t *testing.T) {
	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond, 100 * time.Millisecond}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{0, 1}, {0.5, 3}, {0.99, 4}, {1, 100}} {
		if got := pct(lat, tc.q); got != tc.want {
			t.Errorf("pct(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if pct(nil, 0.5) != 0 {
		t.Error("pct of nothing")
	}
}

// The get_sse_* phase holds idle event streams open and still answers.
func TestRunWithIdleStreams(t *testing.T) {
	r := testenv.NewRedis(t)
	spec, err := os.ReadFile("../../examples/job.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Redis: r.Client, Prefix: r.Prefix, Clients: 2, Duration: 200 * time.Millisecond, Spec: spec,
		OpenWorkers: 4, SSEStreams: 30, SSEGetRate: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.SSEStreams != 30 || res.GetSSEPerS <= 0 || res.GetSSEP99Ms < res.GetSSEP50Ms || res.GetSSEP50Ms <= 0 || res.ReadyzSSECode != 200 {
		t.Errorf("result %+v", res)
	}
}
