package core

import (
	"context"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs/jobmetrics"
)

func TestMetricSinkFlushesOnStop(t *testing.T) {
	r := testenv.NewRedis(t)
	m := NewMetricSink(r.Client, r.Prefix, "j-1")
	stop := m.Start(func(err error) { t.Error(err) })
	for i := int64(1); i <= 50; i++ {
		m.Add(i, 0, map[string]float64{"loss": 1 / float64(i)})
	}
	stop() // well before the first tick: the last points are written by stop
	pts, err := jobmetrics.New(r.Client, r.Prefix).Read(context.Background(), "j-1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 50 || pts[49].Step != 50 || pts[49].Values["loss"] != 1.0/50 {
		t.Fatalf("%d points, last %+v", len(pts), pts[len(pts)-1])
	}
}
