package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The step lines of `edl bench torch`: parsing what a worker printed per
// applied step, and the stall and steps-redone figures over them.

// stepLine is one applied step as a worker printed it.
type stepLine struct {
	Step  int64
	Time  float64 // Unix seconds
	World int     // world size when printed; 0 when the line does not say
	// Run names the program's start: its restart count and generation
	// (torchrun's TORCHELASTIC_RESTART_COUNT, edl's EDL_GENERATION) when
	// the line says; "" otherwise.
	Run string
}

var (
	reStep           = regexp.MustCompile(`\bstep["']?\s*[=:]?\s*(\d+)`)
	reTime           = regexp.MustCompile(`\b(?:time|ts|t)["']?\s*[=:]\s*"?(\d+(?:\.\d+)?)`)
	reWorld          = regexp.MustCompile(`\b(?:world_size|world)["']?\s*[=:]\s*(\d+)`)
	reRun            = regexp.MustCompile(`\b(restart|gen)["']?\s*[=:]\s*"?([\w-]+)`)
	reTag            = regexp.MustCompile(`^[A-Z]{2,}$`)
	reTorchrunPrefix = regexp.MustCompile(`^\[[^\]]*\]:`)
	reStamp          = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`)
)

// parseStepLine reads a step line: a JSON object (after any prefix such as
// torchrun's "[default0]:") with "step" and "time" (or "t", "ts",
// "timestamp": Unix seconds or RFC 3339) and optionally "world_size", or
// text with step=N and time=SECONDS (or an RFC 3339 time). A JSON line
// with an "event" other than "step" is not a step.
func parseStepLine(line string) (stepLine, bool) {
	if i := strings.IndexByte(line, '{'); i >= 0 {
		var m map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(line[i:])), &m) == nil {
			if ev, ok := m["event"].(string); ok && ev != "step" {
				return stepLine{}, false
			}
			step, ok := m["step"].(float64)
			if !ok {
				return stepLine{}, false
			}
			sl := stepLine{Step: int64(step)}
			for _, k := range []string{"time", "t", "ts", "timestamp"} {
				switch v := m[k].(type) {
				case float64:
					sl.Time = v
				case string:
					if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
						sl.Time = float64(t.UnixNano()) / 1e9
					}
				}
				if sl.Time != 0 {
					break
				}
			}
			for _, k := range []string{"world_size", "world"} {
				if v, ok := m[k].(float64); ok {
					sl.World = int(v)
				}
			}
			var run []string
			for _, k := range []string{"restart", "gen"} {
				if v, ok := m[k]; ok && v != nil {
					run = append(run, k+"="+fmt.Sprint(v))
				}
			}
			sl.Run = strings.Join(run, " ")
			return sl, sl.Time != 0
		}
	}
	// Text: "STEP step=N time=T world=W ..." (examples/torch/train.py) or
	// any line with step and time; a line tagged otherwise (CKPT, RESUME,
	// DONE) is not a step.
	text := strings.TrimSpace(reTorchrunPrefix.ReplaceAllString(line, ""))
	if f := strings.Fields(text); len(f) > 0 && reTag.MatchString(f[0]) && f[0] != "STEP" {
		return stepLine{}, false
	}
	sm := reStep.FindStringSubmatch(text)
	if sm == nil {
		return stepLine{}, false
	}
	step, _ := strconv.ParseInt(sm[1], 10, 64)
	sl := stepLine{Step: step}
	if tm := reTime.FindStringSubmatch(text); tm != nil {
		sl.Time, _ = strconv.ParseFloat(tm[1], 64)
	} else if ts := reStamp.FindString(text); ts != "" {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			sl.Time = float64(t.UnixNano()) / 1e9
		}
	}
	if wm := reWorld.FindStringSubmatch(text); wm != nil {
		sl.World, _ = strconv.Atoi(wm[1])
	}
	var run []string
	for _, m := range reRun.FindAllStringSubmatch(text, -1) {
		run = append(run, m[1]+"="+m[2])
	}
	sl.Run = strings.Join(run, " ")
	return sl, sl.Time != 0
}

// restartedAfter reports whether seq shows a restart after event (Unix
// seconds): the step went back, the world size changed or the line's run
// (restart count, generation) changed; and how many steps were applied
// after it.
func restartedAfter(seq []stepLine, event float64) (bool, int) {
	var prev *stepLine
	restarted, n := false, 0
	for i := range seq {
		l := &seq[i]
		if restarted {
			n++
		}
		if prev != nil && l.Time >= event && !restarted &&
			(l.Step <= prev.Step || (l.World != 0 && prev.World != 0 && l.World != prev.World) || l.Run != prev.Run) {
			restarted, n = true, 1
		}
		prev = l
	}
	return restarted, n
}

// torchFigures are the figures over the survivors' step sequences.
type torchFigures struct {
	stall     float64
	redone    int64
	survivors int
	restarted bool
}

// analyzeSteps takes each worker's steps in the order printed. Survivors
// are the workers not in exclude with steps before event that restarted
// after it (a leaver may still apply a step after the event); when none
// restarted, those with steps both before and after event.
// stall is the longest gap between consecutive steps of a survivor that
// ends after event; redone sums, per survivor, how far the step went back
// at each restart after event (max step before - first step after + 1),
// and the worst survivor's count is reported.
func analyzeSteps(seqs map[string][]stepLine, event float64, exclude map[string]bool) torchFigures {
	f := torchFigures{restarted: true}
	survivor := survivorsOf(seqs, event, exclude)
	for name, seq := range seqs {
		if !survivor[name] {
			continue
		}
		f.survivors++
		var redone int64
		maxStep := seq[0].Step
		for i := 1; i < len(seq); i++ {
			a, b := seq[i-1], seq[i]
			if b.Time >= event {
				f.stall = math.Max(f.stall, b.Time-a.Time)
				if b.Step <= a.Step { // went back: a restart from an older step
					redone += maxStep - b.Step + 1
				}
			}
			maxStep = max(maxStep, b.Step)
		}
		f.redone = max(f.redone, redone)
		if ok, _ := restartedAfter(seq, event); !ok {
			f.restarted = false
		}
	}
	if f.survivors == 0 {
		f.restarted = false
	}
	f.stall = math.Round(f.stall*1000) / 1000
	return f
}

// survivorsOf picks the survivors (see analyzeSteps).
func survivorsOf(seqs map[string][]stepLine, event float64, exclude map[string]bool) map[string]bool {
	restarted, spanning := map[string]bool{}, map[string]bool{}
	for name, seq := range seqs {
		if exclude[name] || len(seq) == 0 || seq[0].Time >= event || seq[len(seq)-1].Time < event {
			continue
		}
		spanning[name] = true
		if ok, _ := restartedAfter(seq, event); ok {
			restarted[name] = true
		}
	}
	if len(restarted) > 0 {
		return restarted
	}
	return spanning
}

// stepLog collects step lines from several named streams.
type stepLog struct {
	mu   sync.Mutex
	seqs map[string][]stepLine
}

func newStepLog() *stepLog { return &stepLog{seqs: map[string][]stepLine{}} }

func (s *stepLog) add(name string, l stepLine) {
	s.mu.Lock()
	s.seqs[name] = append(s.seqs[name], l)
	s.mu.Unlock()
}

func (s *stepLog) set(name string, seq []stepLine) {
	s.mu.Lock()
	s.seqs[name] = seq
	s.mu.Unlock()
}

func (s *stepLog) snapshot() map[string][]stepLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]stepLine, len(s.seqs))
	for k, v := range s.seqs {
		out[k] = append([]stepLine(nil), v...)
	}
	return out
}

// scan reads r line by line into the log under name, and copies the lines
// to w when it is not nil.
func (s *stepLog) scan(name string, r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if w != nil {
			fmt.Fprintln(w, sc.Text())
		}
		if l, ok := parseStepLine(sc.Text()); ok {
			s.add(name, l)
		}
	}
}

// waitFor polls cond every 100 ms until it holds, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// warmedUp: each named worker applied at least n steps.
func warmedUp(log *stepLog, names []string, n int) func() bool {
	return func() bool {
		seqs := log.snapshot()
		for _, name := range names {
			seq := seqs[name]
			if len(seq) == 0 || seq[len(seq)-1].Step < int64(n) {
				return false
			}
		}
		return true
	}
}

// doneAfter: every survivor restarted after event and applied n steps
// since.
func doneAfter(log *stepLog, survivors []string, event float64, n int) func() bool {
	return func() bool {
		seqs := log.snapshot()
		for _, name := range survivors {
			ok, k := restartedAfter(seqs[name], event)
			if !ok || k < n {
				return false
			}
		}
		return true
	}
}

func unixNow() float64 { return float64(time.Now().UnixNano()) / 1e9 }
