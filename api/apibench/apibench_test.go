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
	res, err := Run(context.Background(), Config{Redis: r.Client, Prefix: r.Prefix, Clients: 4, Duration: 200 * time.Millisecond, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Submits == 0 || res.SubmitPerS <= 0 || res.GetPerS <= 0 || res.ListPerS <= 0 ||
		res.SubmitP99Ms < res.SubmitP50Ms || res.GetP99Ms <= 0 {
		t.Errorf("result %+v", res)
	}
	n, err := r.Client.ZCard(context.Background(), r.Prefix+"tenant:bench:jobs").Result()
	if err != nil || int(n) != res.Submits {
		t.Errorf("%d jobs stored, %d submits counted (%v)", n, res.Submits, err)
	}
	if _, err := Run(context.Background(), Config{Redis: r.Client, Spec: []byte(`{}`)}); err == nil {
		t.Error("invalid spec accepted")
	}
}
