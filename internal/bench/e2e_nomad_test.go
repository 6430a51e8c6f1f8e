package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseNomadBenchNamesTheBadFlag(t *testing.T) {
	cases := []struct {
		jobs                  string
		rounds, starts, trial int
		interval              time.Duration
		want                  string
	}{
		{"1,x", 1, 1, 0, time.Millisecond, "--nomad-jobs"},
		{"0", 1, 1, 0, time.Millisecond, "--nomad-jobs"},
		{"1", 0, 1, 0, time.Millisecond, "--nomad-rounds"},
		{"1", 1, 0, 0, time.Millisecond, "--nomad-starts"},
		{"1", 1, 200, 0, time.Millisecond, "--nomad-starts"},
		{"1", 1, 1, -1, time.Millisecond, "--nomad-trials"},
		{"1", 1, 1, 0, 0, "--nomad-interval"},
	}
	for _, tc := range cases {
		_, err := parseNomadBench(tc.jobs, tc.rounds, tc.starts, tc.trial, tc.interval)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one naming %s", tc, err, tc.want)
		}
	}
	o, err := parseNomadBench("1, 10,100", 20, 100, 25, 20*time.Millisecond)
	if err != nil || len(o.jobCounts) != 3 || o.jobCounts[2] != 100 {
		t.Errorf("good flags: %+v %v", o, err)
	}
}
