package jobmetrics_test

import (
	"context"
	"math"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestAppendRead(t *testing.T) {
	ctx := context.Background()
	r := testenv.NewRedis(t)
	l := jobmetrics.New(r.Client, r.Prefix)
	if err := l.Append(ctx, "j-1", jobmetrics.Point{Step: 1, Values: map[string]float64{"loss": 2, "bad": math.NaN()}},
		jobmetrics.Point{Step: 2, Epoch: 1, Values: map[string]float64{"loss": 1.5}}); err != nil {
		t.Fatal(err)
	}
	pts, err := l.Read(ctx, "j-1", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Step != 1 || pts[0].Values["loss"] != 2 || len(pts[0].Values) != 1 || pts[1].Epoch != 1 {
		t.Fatalf("points: %+v", pts)
	}
	more, err := l.Read(ctx, "j-1", pts[0].ID, 10)
	if err != nil || len(more) != 1 || more[0].Step != 2 {
		t.Fatalf("after the first: %+v %v", more, err)
	}
	if n, _ := r.Client.Exists(ctx, jobmetrics.Key(r.Prefix, "j-1")).Result(); n != 1 {
		t.Fatal("not under the job's key")
	}
}
