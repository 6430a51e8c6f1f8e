package jobmetrics_test

import (
	"context"
	"encoding/json"
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
	if len(pts) != 2 || pts[0].Step != 1 || pts[0].Values["loss"] != 2 || len(pts[0].Values) != 2 || !math.IsNaN(pts[0].Values["bad"]) || pts[1].Epoch != 1 {
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

// A diverged value (NaN, +Inf, -Inf) is a real observation: stored and
// read back as itself, never dropped; finite values beside it are kept as
// before, and an old reader (no non_finite) sees them.
func TestAppendReadNonFinite(t *testing.T) {
	ctx := context.Background()
	r := testenv.NewRedis(t)
	l := jobmetrics.New(r.Client, r.Prefix)
	if err := l.Append(ctx, "j-1",
		jobmetrics.Point{Step: 1, Values: map[string]float64{"loss": math.NaN(), "acc": 0.5}},
		jobmetrics.Point{Step: 2, Epoch: 1, Values: map[string]float64{"loss": math.Inf(1)}},
		jobmetrics.Point{Step: 3, Values: map[string]float64{"val_loss": math.Inf(-1)}}); err != nil {
		t.Fatal(err)
	}
	pts, err := l.Read(ctx, "j-1", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 3 || !math.IsNaN(pts[0].Values["loss"]) || pts[0].Values["acc"] != 0.5 ||
		!math.IsInf(pts[1].Values["loss"], 1) || pts[1].Epoch != 1 || !math.IsInf(pts[2].Values["val_loss"], -1) {
		t.Fatalf("points: %+v", pts)
	}
	raw, err := r.Client.XRange(ctx, jobmetrics.Key(r.Prefix, "j-1"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := raw[0].Values["m"]; got != `{"step":1,"values":{"acc":0.5},"non_finite":{"loss":"NaN"}}` {
		t.Fatalf("stored: %s", got)
	}
	var old struct {
		Values map[string]float64 `json:"values"`
	}
	if err := json.Unmarshal([]byte(raw[1].Values["m"].(string)), &old); err != nil || len(old.Values) != 0 {
		t.Fatalf("an old reader: %+v %v", old, err)
	}
}
