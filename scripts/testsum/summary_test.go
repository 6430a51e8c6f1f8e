package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	const p = `"Package":"github.com/edl-nomad/edl/worker"`
	tests := []struct {
		name     string
		stream   string
		failed   bool
		want     []string // substrings of the output
		wantNot  []string
		lastLine string
	}{
		{
			name: "all pass",
			stream: `{"Action":"start",` + p + `}
{"Action":"run",` + p + `,"Test":"TestA"}
{"Action":"output",` + p + `,"Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output",` + p + `,"Test":"TestA","Output":"    a_test.go:3: chatter\n"}
{"Action":"pass",` + p + `,"Test":"TestA","Elapsed":1.5}
{"Action":"output",` + p + `,"Output":"PASS\n"}
{"Action":"output",` + p + `,"Output":"ok  \tgithub.com/edl-nomad/edl/worker\t1.6s\n"}
{"Action":"pass",` + p + `,"Elapsed":1.6}
`,
			want:     []string{"ok  \tgithub.com/edl-nomad/edl/worker\t1.6s", "1 packages: 1 ok, 0 failed", "slowest packages: worker 2s", "worker.TestA 2s"},
			wantNot:  []string{"chatter", "=== RUN"},
			lastLine: "tests: 1 passed, 0 failed, 0 skipped",
		},
		{
			name: "a subtest fails",
			stream: `{"Action":"run",` + p + `,"Test":"TestB"}
{"Action":"output",` + p + `,"Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output",` + p + `,"Test":"TestB/x","Output":"    b_test.go:9: got 1, want 2\n"}
{"Action":"output",` + p + `,"Test":"TestB/x","Output":"    --- FAIL: TestB/x (0.00s)\n"}
{"Action":"fail",` + p + `,"Test":"TestB/x","Elapsed":0}
{"Action":"output",` + p + `,"Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"fail",` + p + `,"Test":"TestB","Elapsed":0}
{"Action":"output",` + p + `,"Output":"FAIL\tgithub.com/edl-nomad/edl/worker\t0.2s\n"}
{"Action":"fail",` + p + `,"Elapsed":0.2}
`,
			failed:   true,
			want:     []string{"got 1, want 2", "--- FAIL: TestB (0.00s)", "FAIL\tgithub.com/edl-nomad/edl/worker", "FAILED worker (TestB/x, TestB)\n    TestB/x: b_test.go:9: got 1, want 2\n"},
			lastLine: "tests: 0 passed, 1 failed, 0 skipped",
		},
		{
			name: "the summary repeats a failed test's last messages, not the logs dumped after them",
			stream: `{"Action":"run",` + p + `,"Test":"TestK"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"    k_test.go:10: progress 1\n"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"    k_test.go:10: progress 2\n"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"    k_test.go:10: progress 3\n"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"    k_test.go:10: progress 4\n"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"    k_test.go:40: samples missed 3, repeated 0\n"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"    harness_test.go:108: /tmp/w1.log (tail):\n"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"        STEP step=7\n"}
{"Action":"output",` + p + `,"Test":"TestK","Output":"--- FAIL: TestK (45.90s)\n"}
{"Action":"fail",` + p + `,"Test":"TestK","Elapsed":45.9}
{"Action":"output",` + p + `,"Output":"FAIL\tgithub.com/edl-nomad/edl/worker\t46.0s\n"}
{"Action":"fail",` + p + `,"Elapsed":46}
`,
			failed: true,
			want: []string{"FAILED worker (TestK)\n    TestK: k_test.go:10: progress 2\n    TestK: k_test.go:10: progress 3\n" +
				"    TestK: k_test.go:10: progress 4\n    TestK: k_test.go:40: samples missed 3, repeated 0\nslowest"},
			lastLine: "tests: 0 passed, 1 failed, 0 skipped",
		},
		{
			name: "a package ends twice: its failure stays, its times add",
			stream: `{"Action":"run",` + p + `,"Test":"TestF"}
{"Action":"fail",` + p + `,"Test":"TestF","Elapsed":1}
{"Action":"output",` + p + `,"Output":"FAIL\tgithub.com/edl-nomad/edl/worker\t1.0s\n"}
{"Action":"fail",` + p + `,"Elapsed":1}
{"Action":"run",` + p + `,"Test":"TestG"}
{"Action":"pass",` + p + `,"Test":"TestG","Elapsed":2}
{"Action":"pass",` + p + `,"Elapsed":2}
`,
			failed:   true,
			want:     []string{"1 packages: 0 ok, 1 failed", "slowest packages: worker 3s", "FAILED worker (TestF)"},
			lastLine: "tests: 1 passed, 1 failed, 0 skipped",
		},
		{
			name: "the binary is killed mid-test",
			stream: `{"Action":"run",` + p + `,"Test":"TestC"}
{"Action":"output",` + p + `,"Test":"TestC","Output":"    c_test.go:4: waiting for the checkpoint\n"}
{"Action":"output",` + p + `,"Output":"signal: killed\n"}
{"Action":"output",` + p + `,"Output":"FAIL\tgithub.com/edl-nomad/edl/worker\t9.0s\n"}
{"Action":"fail",` + p + `,"Elapsed":9}
`,
			failed:   true,
			want:     []string{"failed outside any test", "signal: killed", "TestC (still running when the package ended)", "waiting for the checkpoint", "FAILED worker (failed outside any test)"},
			lastLine: "tests: 0 passed, 0 failed, 0 skipped",
		},
		{
			name: "a build fails",
			stream: `{"ImportPath":"github.com/edl-nomad/edl/worker [github.com/edl-nomad/edl/worker.test]","Action":"build-output","Output":"worker/x.go:1:1: syntax error\n"}
{"ImportPath":"github.com/edl-nomad/edl/worker [github.com/edl-nomad/edl/worker.test]","Action":"build-fail"}
{"Action":"output",` + p + `,"Output":"FAIL\tgithub.com/edl-nomad/edl/worker [build failed]\n"}
{"Action":"fail",` + p + `,"Elapsed":0,"FailedBuild":"github.com/edl-nomad/edl/worker [github.com/edl-nomad/edl/worker.test]"}
`,
			failed: true,
			want:   []string{"syntax error", "build failed: see the errors above"},
		},
		{
			name: "the stream ends while a package runs",
			stream: `{"Action":"run",` + p + `,"Test":"TestD"}
{"Action":"output",` + p + `,"Test":"TestD","Output":"    d_test.go:4: step 3\n"}
`,
			failed: true,
			want:   []string{"worker: the go test -json stream ended while it ran; its output so far", "TestD (still running)", "step 3", "FAILED worker (no result: the go test -json stream ended while it ran)"},
		},
		{
			name:   "lines that are not JSON pass through",
			stream: "go: downloading example.com/m v1.0.0\n",
			want:   []string{"go: downloading example.com/m v1.0.0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			s := newSummary(&out)
			if err := s.read(strings.NewReader(tc.stream)); err != nil {
				t.Fatal(err)
			}
			s.finish(5)
			got := out.String()
			if s.failed() != tc.failed {
				t.Errorf("failed() = %v, want %v", s.failed(), tc.failed)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("output has %q:\n%s", w, got)
				}
			}
			if tc.lastLine != "" {
				ls := strings.Split(strings.TrimSpace(got), "\n")
				if last := ls[len(ls)-1]; last != tc.lastLine {
					t.Errorf("last line %q, want %q", last, tc.lastLine)
				}
			}
		})
	}
}

func TestSummaryInterrupted(t *testing.T) {
	const p = `"Package":"github.com/edl-nomad/edl/worker"`
	var out bytes.Buffer
	s := newSummary(&out)
	// The stream stays open: go test is still running when the signal comes.
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.read(r) }()
	if _, err := io.WriteString(w, `{"Action":"run",`+p+`,"Test":"TestE"}
{"Action":"output",`+p+`,"Test":"TestE","Output":"    e_test.go:7: waiting for a generation of 2\n"}
`); err != nil {
		t.Fatal(err)
	}
	// A write returns once it was read, and the scanner handles every line it
	// holds before it reads again: after this second write the first is handled.
	if _, err := io.WriteString(w, "go: still building\n"); err != nil {
		t.Fatal(err)
	}
	s.interrupt("terminated")
	s.finish(5)
	w.Close()
	<-done
	got := out.String()
	for _, want := range []string{"worker: interrupted (terminated) while it ran", "TestE (still running)", "waiting for a generation of 2", "FAILED worker (no result: interrupted (terminated) while it ran)"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !s.failed() {
		t.Error("an interrupted run is not a failure")
	}
}
