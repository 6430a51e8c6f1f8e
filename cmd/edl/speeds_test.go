package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/planner/loop"
	"github.com/edl-nomad/edl/worker/coord"
)

func TestRedisSpeedsReadsTheWorkersHash(t *testing.T) {
	r := testenv.NewRedisServer(t)
	ctx := context.Background()
	// The key and value format the workers write (worker/builtin/speed.go).
	key := coord.NewKeys(r.Prefix, "job1").Speed()
	at := time.UnixMilli(1700000000000)
	if err := r.Client.HSet(ctx, key, "alloc-a", `{"ms":12.5,"gen":3,"world":2,"at":1700000000000}`,
		"alloc-b", "40.000", "bad", "x").Err(); err != nil {
		t.Fatal(err)
	}
	rs := redisSpeeds{rdb: r.Client, prefix: r.Prefix}
	got, err := rs.StepTimes(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	a := got["alloc-a"]
	if len(got) != 1 || a.StepMillis != 12.5 || a.Generation != 3 || a.WorldSize != 2 || !a.At.Equal(at) || !a.Published {
		t.Fatalf("StepTimes = %+v, want only alloc-a, 12.5 ms of generation 3 at %s (an old-format figure and a bad value skipped)", got, at)
	}
	if got, err := rs.StepTimes(ctx, "other"); err != nil || len(got) != 0 {
		t.Fatalf("job without workers = %v, %v; want empty", got, err)
	}
	if st, err := rs.JobDone(ctx, "job1"); err != nil || st != "" {
		t.Fatalf("JobDone before the marker = %q, %v", st, err)
	}
	r.Client.Set(ctx, coord.NewKeys(r.Prefix, "job1").Done(), "succeeded", 0)
	if st, err := rs.JobDone(ctx, "job1"); err != nil || st != jobs.Succeeded {
		t.Fatalf("JobDone = %q, %v; want succeeded", st, err)
	}
	var lc loop.Config
	plannerWorkers(&lc, 0, 3, r.Client, r.Prefix)
	if lc.Speeds != nil || lc.Policy.Straggler.Factor != 0 || lc.Done == nil {
		t.Fatal("--straggler-factor 0 did not disable replacement (or lost the done marker)")
	}
}

func TestStragglerFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "--straggler-factor", "0.9"},
		{"dev", "--straggler-rounds", "0"},
		{"dev", "--callback-allow", "10.0.0.0/33"},
	} {
		var out, errb bytes.Buffer
		flag := strings.TrimPrefix(args[1], "--")
		if code := runMain(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), flag) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", args, code, errb.String(), flag)
		}
	}
}
