package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseStepLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want stepLine
		ok   bool
	}{
		{`{"event": "step", "step": 12, "time": 1700000000.25, "rank": 0, "world_size": 3, "restart": 1, "gen": null}`, stepLine{12, 1700000000.25, 3, "restart=1"}, true},
		{`[default0]:{"event": "step", "step": 7, "time": 1700000001.5, "world_size": 2}`, stepLine{7, 1700000001.5, 2, ""}, true},
		{`{"step": 3, "t": 1700000002}`, stepLine{3, 1700000002, 0, ""}, true},
		{`{"step": 4, "timestamp": "2023-11-14T22:13:20.5Z", "world": 2}`, stepLine{4, 1700000000.5, 2, ""}, true},
		{`{"event": "checkpoint", "step": 20, "time": 1700000003}`, stepLine{}, false},
		{`{"step": 5}`, stepLine{}, false},
		{`step=9 loss=0.3 time=1700000004.75 world=3`, stepLine{9, 1700000004.75, 3, ""}, true},
		{`2023-11-14T22:13:20Z rank 1 step 10 loss 2.1`, stepLine{10, 1700000000, 0, ""}, true},
		{`INFO:torch.distributed.elastic:rendezvous round 2`, stepLine{}, false},
		{`STEP step=41 time=1700000005.123456 rank=1 world=3 restart=0 gen=4 loss=2.2`, stepLine{41, 1700000005.123456, 3, "restart=0 gen=4"}, true},
		{`[default1]:STEP step=42 time=1700000006.5 rank=1 world=2 restart=1 gen=- loss=2.1`, stepLine{42, 1700000006.5, 2, "restart=1 gen=-"}, true},
		{`CKPT step=40 time=1700000005.0 reason=periodic`, stepLine{}, false},
		{`[default0]:RESUME step=40 time=1700000009.0 rank=0`, stepLine{}, false},
		{`DONE step=300 time=1700000100.0 rank=0`, stepLine{}, false},
		{`[default0]:loading checkpoint`, stepLine{}, false},
	} {
		got, ok := parseStepLine(tc.line)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseStepLine(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func seq(pairs ...float64) []stepLine {
	var out []stepLine
	for i := 0; i+2 < len(pairs)+1; i += 3 {
		out = append(out, stepLine{Step: int64(pairs[i]), Time: pairs[i+1], World: int(pairs[i+2])})
	}
	return out
}

func TestAnalyzeSteps(t *testing.T) {
	// Worker a: steps 1..25 every 0.1 s from t=100, event at 102.45, the
	// restart at t=106.5 resumes from checkpoint 20 (steps 21..25 redone).
	var a []stepLine
	for s := 1; s <= 25; s++ {
		a = append(a, stepLine{int64(s), 100 + float64(s)*0.1, 2, ""})
	}
	for s := 21; s <= 30; s++ {
		a = append(a, stepLine{int64(s), 106.5 + float64(s-21)*0.1, 3, ""})
	}
	// b: the same with a 3 s stall and no step redone (it checkpointed at 25).
	var b []stepLine
	for s := 1; s <= 25; s++ {
		b = append(b, stepLine{int64(s), 100 + float64(s)*0.1, 2, ""})
	}
	for s := 26; s <= 30; s++ {
		b = append(b, stepLine{int64(s), 105.5 + float64(s-26)*0.1, 3, ""})
	}
	newcomer := seq(21, 106.5, 3, 22, 106.6, 3)
	// The leaver applies one more step just after the event, then goes.
	leaver := seq(1, 100.1, 2, 24, 102.4, 2, 25, 102.5, 2)
	f := analyzeSteps(map[string][]stepLine{"a": a, "b": b, "new": newcomer, "gone": leaver, "killed": a}, 102.45, map[string]bool{"killed": true})
	if f.survivors != 2 {
		t.Errorf("survivors %d, want 2 (a and b; not the newcomer, the leaver or the excluded)", f.survivors)
	}
	if f.stall != 4 { // a: 102.5 -> 106.5
		t.Errorf("stall %v, want 4", f.stall)
	}
	if f.redone != 5 {
		t.Errorf("redone %d, want 5", f.redone)
	}
	if !f.restarted {
		t.Error("not seen as restarted")
	}
	// Gaps before the event do not count; no restart seen.
	quiet := seq(1, 100, 2, 2, 109, 2, 3, 110, 2, 4, 110.1, 2)
	f = analyzeSteps(map[string][]stepLine{"q": quiet}, 109.5, nil)
	if f.stall != 1 || f.redone != 0 || f.restarted {
		t.Errorf("quiet: %+v, want stall 1, none redone, not restarted", f)
	}
}

func TestRestartedAfter(t *testing.T) {
	s := seq(5, 1, 2, 6, 2, 2, 4, 5, 2, 5, 6, 2, 6, 7, 2)
	if ok, n := restartedAfter(s, 1.5); !ok || n != 3 {
		t.Errorf("step back: %v %d, want true 3", ok, n)
	}
	w := seq(5, 1, 2, 6, 2, 3, 7, 3, 3)
	if ok, n := restartedAfter(w, 1.5); !ok || n != 2 {
		t.Errorf("world change: %v %d, want true 2", ok, n)
	}
	if ok, _ := restartedAfter(s, 10); ok {
		t.Error("restart seen after the end")
	}
	// Resumed at the next step with the same world: the run tells.
	r := []stepLine{{5, 1, 3, "restart=0"}, {6, 2, 3, "restart=0"}, {7, 5, 3, "restart=1"}, {8, 6, 3, "restart=1"}}
	if ok, n := restartedAfter(r, 1.5); !ok || n != 2 {
		t.Errorf("run change: %v %d, want true 2", ok, n)
	}
}

func TestPrintTorchTable(t *testing.T) {
	one, half := 1.0, 0.5
	var buf bytes.Buffer
	printTorchTable(&buf, []torchResult{
		{System: "torchrun", Scenario: "scale_out", Workers: "2->3", StallS: 3.8, StepsRedone: 12, RatioVsTorchrun: &one, Restarted: true},
		{System: "edl-restart", Scenario: "scale_out", Workers: "2->3", StallS: 1.9, StepsRedone: 3, RatioVsTorchrun: &half},
	})
	out := buf.String()
	for _, want := range []string{"stall_s", "torchrun", "3.80", "1.00x", ">=1.90", "0.50x"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
