package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/worker/coord"
)

func TestRedisSpeedsReadsTheWorkersHash(t *testing.T) {
	r := testenv.NewRedisServer(t)
	ctx := context.Background()
	// The key and value format the workers write (worker/speed.go).
	key := coord.NewKeys(r.Prefix, "job1").Speed()
	if err := r.Client.HSet(ctx, key, "alloc-a", "12.500", "alloc-b", "40.000", "bad", "x").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := redisSpeeds{rdb: r.Client, prefix: r.Prefix}.StepMillis(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["alloc-a"] != 12.5 || got["alloc-b"] != 40 {
		t.Fatalf("StepMillis = %v, want alloc-a 12.5 and alloc-b 40 (bad value skipped)", got)
	}
	if got, err := (redisSpeeds{rdb: r.Client, prefix: r.Prefix}).StepMillis(ctx, "other"); err != nil || len(got) != 0 {
		t.Fatalf("job without workers = %v, %v; want empty", got, err)
	}
	if stragglerSpeeds(0, r.Client, r.Prefix) != nil {
		t.Fatal("--straggler-factor 0 did not disable replacement")
	}
}

func TestStragglerFlagsAreChecked(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "--straggler-factor", "0.9"},
		{"dev", "--straggler-rounds", "0"},
	} {
		var out, errb bytes.Buffer
		flag := strings.TrimPrefix(args[1], "--")
		if code := runMain(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), flag) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", args, code, errb.String(), flag)
		}
	}
}
