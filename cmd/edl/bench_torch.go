package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

func init() {
	registerBench(benchmark{
		name:    "torch",
		summary: "a torchrun DDP script under torchrun (c10d, tuned) and under edl restart mode: stall and steps redone on scale-out, scale-in, a killed worker",
		run:     runBenchTorch,
	})
}

// torchResult is one JSON line of `edl bench torch --json`.
type torchResult struct {
	System   string  `json:"system"`   // torchrun | edl-restart | edl-live
	Scenario string  `json:"scenario"` // scale_out | scale_in | failure
	StallS   float64 `json:"stall_s"`  // longest gap between two applied steps on a surviving worker
	// StepsRedone is how many steps a surviving worker computed again
	// after the restart (it resumed from an older checkpoint).
	StepsRedone int64 `json:"steps_redone"`
	// RatioVsTorchrun is StallS over torchrun's in the same scenario (1 for
	// torchrun; null when torchrun was not run).
	RatioVsTorchrun *float64 `json:"ratio_vs_torchrun"`
	Workers         string   `json:"workers"`   // e.g. "2->3"
	Survivors       int      `json:"survivors"` // workers the figures are taken over
	Restarted       bool     `json:"restarted"` // every survivor was seen to restart (else the stall is a lower bound)
	// SamplesMissed and SamplesRepeated count sample ids per epoch (edl-live
	// only: the other systems' scripts do not draw from edl's partitions).
	SamplesMissed   *int64 `json:"samples_missed,omitempty"`
	SamplesRepeated *int64 `json:"samples_repeated,omitempty"`
}

// torchBench is the configuration shared by both systems.
type torchBench struct {
	python, script  string
	scriptArgs      []string
	warmup, after   int
	ckptEvery       int
	timeout         time.Duration
	dir             string
	log             io.Writer // progress lines
	pythonTeeNeeded bool
}

var torchScenarios = []string{"scale_out", "scale_in", "failure"}

func runBenchTorch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench torch", "Runs one torchrun DDP script (it must print one line per applied step with the step and\na timestamp, e.g. {\"step\": N, \"time\": UNIX_SECONDS}, and checkpoint to $EDL_CHECKPOINT_DIR)\nunder torchrun (c10d rendezvous, --nnodes=2:3, last_call_timeout=1, join_timeout=60,\n--monitor_interval 1) and under edl restart mode (edl dev in this process), through\nscale-out 2->3, scale-in 3->2 and a SIGKILL of one worker's program. Prints one JSON\nline per system and scenario (--json), then a table (on stderr with --json).", stderr)
	modes := fs.String("mode", "torchrun,edl-restart,edl-live", "systems to run, comma-separated: torchrun, edl-restart, edl-live (examples/torch/train_live.py through the edl package, no restart)")
	liveScript := fs.String("live-script", "examples/torch/train_live.py", "the live-mode script of --mode edl-live (the same model as --script, written with the edl package)")
	scenarios := fs.String("scenarios", strings.Join(torchScenarios, ","), "scenarios, comma-separated: scale_out, scale_in, failure")
	python := fs.String("python", "/usr/bin/python3", "Python with torch (torchrun is its -m torch.distributed.run)")
	script := fs.String("script", "examples/torch/train.py", "the training script")
	scriptArgs := fs.String("script-args", "", "extra arguments for the script (space-separated)")
	warmup := fs.Int("warmup", 15, "applied steps before the event")
	after := fs.Int("after", 10, "steps each survivor applies after its restart before the run stops")
	ckpt := fs.Int("ckpt-every", 20, "the script's --ckpt-every (its checkpoint period in steps)")
	timeout := fs.Duration("timeout", 4*time.Minute, "limit of one scenario of one system")
	asJSON := fs.Bool("json", false, "print JSON lines (the table then goes to stderr)")
	keep := fs.String("keep-dir", "", "keep the agents' and workers' output in this folder")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	systems, err := pickList("mode", *modes, []string{"torchrun", "edl-restart", "edl-live"})
	if err != nil {
		return err
	}
	scen, err := pickList("scenarios", *scenarios, torchScenarios)
	if err != nil {
		return err
	}
	if *warmup < 2 || *after < 1 || *ckpt < 1 {
		return usageErrorf("bench torch: need --warmup >= 2, --after >= 1, --ckpt-every >= 1")
	}
	abs, err := filepath.Abs(*script)
	if err != nil {
		return err
	}
	if _, err := os.Stat(abs); err != nil {
		return usageErrorf("bench torch: --script: %v", err)
	}
	if _, err := exec.LookPath(*python); err != nil {
		return usageErrorf("bench torch: --python: %v", err)
	}
	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "edl-bench-torch-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	b := &torchBench{python: *python, script: abs, scriptArgs: strings.Fields(*scriptArgs), warmup: *warmup, after: *after,
		ckptEvery: *ckpt, timeout: *timeout, dir: dir, log: stderr}
	b.pythonTeeNeeded, err = pythonAtLeast(ctx, *python, 3, 11)
	if err != nil {
		return err
	}
	var results []torchResult
	base := map[string]float64{}
	emit := func(r torchResult) error {
		if r.System == "torchrun" {
			base[r.Scenario] = r.StallS
			one := 1.0
			r.RatioVsTorchrun = &one
		} else if t, ok := base[r.Scenario]; ok && t > 0 {
			q := math.Round(r.StallS/t*1000) / 1000
			r.RatioVsTorchrun = &q
		}
		results = append(results, r)
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false) // "2->3", not "2-\u003e3"
			return enc.Encode(r)
		}
		return nil
	}
	var errs []error // each failed run, reported at the end; the others go on
	for _, sys := range systems {
		for _, sc := range scen {
			var r torchResult
			var err error
			switch sys {
			case "torchrun":
				r, err = b.runTorchrun(ctx, sc)
			case "edl-restart":
				r, err = b.runEdlRestart(ctx, sc)
			case "edl-live":
				r, err = b.runEdlLive(ctx, *liveScript, sc)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("bench torch: %s %s: %w", sys, sc, err))
				if sys == "edl-restart" && errors.Is(err, errExecRefused) {
					break // the other scenarios would fail the same way
				}
				continue
			}
			if err := emit(r); err != nil {
				return err
			}
		}
	}
	table := stdout
	if *asJSON {
		table = stderr
	}
	printTorchTable(table, results)
	return errors.Join(errs...)
}

func pickList(flagName, v string, allowed []string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == s
		}
		if !ok {
			return nil, usageErrorf("bench torch: --%s: %q is not one of %s", flagName, s, strings.Join(allowed, ", "))
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, usageErrorf("bench torch: --%s: empty", flagName)
	}
	return out, nil
}

func pythonAtLeast(ctx context.Context, python string, major, minor int) (bool, error) {
	out, err := exec.CommandContext(ctx, python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])").Output()
	if err != nil {
		return false, fmt.Errorf("bench torch: %s: %w", python, err)
	}
	var ma, mi int
	if _, err := fmt.Sscan(string(out), &ma, &mi); err != nil {
		return false, fmt.Errorf("bench torch: %s version %q: %w", python, out, err)
	}
	return ma > major || (ma == major && mi >= minor), nil
}

func printTorchTable(w io.Writer, rs []torchResult) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tscenario\tworkers\tstall_s\tsteps_redone\tvs torchrun\tmissed/repeated")
	for _, r := range rs {
		ratio := "-"
		if r.RatioVsTorchrun != nil {
			ratio = strconv.FormatFloat(*r.RatioVsTorchrun, 'f', 2, 64) + "x"
		}
		stall := strconv.FormatFloat(r.StallS, 'f', 2, 64)
		if !r.Restarted && r.System != "edl-live" { // live mode restarts nothing
			stall = ">=" + stall
		}
		acct := "-"
		if r.SamplesMissed != nil && r.SamplesRepeated != nil {
			acct = fmt.Sprintf("%d/%d", *r.SamplesMissed, *r.SamplesRepeated)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.System, r.Scenario, r.Workers, stall, r.StepsRedone, ratio, acct)
	}
	tw.Flush()
}

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

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// childPIDs lists the processes whose parent is pid (from /proc).
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			if pp, _ := strconv.Atoi(f[1]); pp == pid {
				out = append(out, n)
			}
		}
	}
	sort.Ints(out)
	return out
}

// ---- torchrun ----

type torchAgent struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (b *torchBench) startAgent(ctx context.Context, runDir, name string, port int, host bool, log *stepLog) (*torchAgent, error) {
	args := []string{"-m", "torch.distributed.run", "--nnodes=2:3", "--nproc_per_node=1",
		"--rdzv_backend=c10d", fmt.Sprintf("--rdzv_endpoint=127.0.0.1:%d", port), "--rdzv_id=edl-bench",
		fmt.Sprintf("--rdzv_conf=last_call_timeout=1,join_timeout=60,is_host=%t", host),
		"--monitor_interval=1", "--max_restarts=10"}
	if b.pythonTeeNeeded {
		args = append(args, "--redirects=1", "--tee=1", "--log_dir="+filepath.Join(runDir, name+"-logs"))
	}
	args = append(args, b.script, "--steps=1000000", fmt.Sprintf("--ckpt-every=%d", b.ckptEvery))
	args = append(args, b.scriptArgs...)
	cmd := exec.Command(b.python, args...)
	cmd.Env = append(os.Environ(), "EDL_CHECKPOINT_DIR="+filepath.Join(runDir, "checkpoint"), "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := os.Create(filepath.Join(runDir, name+".out"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = out
	pr, err := cmd.StdoutPipe()
	if err != nil {
		out.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start torchrun agent %s: %w", name, err)
	}
	a := &torchAgent{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		log.scan(name, pr, out)
		_ = cmd.Wait()
		out.Close()
		close(a.done)
	}()
	return a, nil
}

// stop ends the agent's process group: SIGTERM, SIGKILL after 10 s.
func (a *torchAgent) stop() {
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
}

func (b *torchBench) runTorchrun(ctx context.Context, scenario string) (torchResult, error) {
	runDir := filepath.Join(b.dir, "torchrun-"+scenario)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return torchResult{}, err
	}
	port, err := freePort()
	if err != nil {
		return torchResult{}, err
	}
	log := newStepLog()
	var agents []*torchAgent
	defer func() {
		for _, a := range agents {
			a.stop()
		}
	}()
	start := func(name string) error {
		a, err := b.startAgent(ctx, runDir, name, port, len(agents) == 0, log)
		if err != nil {
			return err
		}
		agents = append(agents, a)
		return nil
	}
	initial := []string{"a", "b"}
	workers := "2->3"
	if scenario != "scale_out" {
		initial, workers = []string{"a", "b", "c"}, "3->2"
	}
	if scenario == "failure" {
		workers = "3 (one killed)"
	}
	for _, n := range initial {
		if err := start(n); err != nil {
			return torchResult{}, err
		}
	}
	fmt.Fprintf(b.log, "bench torch: torchrun %s: %d agents started, warming up\n", scenario, len(initial))
	if err := waitFor(ctx, b.timeout, "the first steps", warmedUp(log, initial, b.warmup)); err != nil {
		return torchResult{}, err
	}
	event := unixNow()
	exclude := map[string]bool{}
	switch scenario {
	case "scale_out":
		if err := start("c"); err != nil {
			return torchResult{}, err
		}
	case "scale_in":
		// The last agent leaves: SIGTERM to the agent, which stops its
		// worker; c10d keeps the rendezvous open for the others.
		_ = agents[2].cmd.Process.Signal(syscall.SIGTERM)
		exclude["c"] = true
	case "failure":
		kids := childPIDs(agents[2].cmd.Process.Pid)
		if len(kids) == 0 {
			return torchResult{}, errors.New("agent c has no worker process to kill")
		}
		for _, k := range kids {
			_ = syscall.Kill(k, syscall.SIGKILL)
		}
		exclude["c"] = true
	}
	survivors := []string{"a", "b"}
	fmt.Fprintf(b.log, "bench torch: torchrun %s: event sent, waiting for the restart\n", scenario)
	werr := waitFor(ctx, b.timeout, "the survivors to restart and train", doneAfter(log, survivors, event, b.after))
	f := analyzeSteps(log.snapshot(), event, exclude)
	if werr != nil && f.survivors == 0 {
		return torchResult{}, werr
	}
	return torchResult{System: "torchrun", Scenario: scenario, StallS: f.stall, StepsRedone: f.redone,
		Workers: workers, Survivors: f.survivors, Restarted: f.restarted && werr == nil}, nil
}

// runEdlLive measures one scenario of live mode (bench_torch_live.go) on the
// same worlds as the other systems: scale_out 2->3, scale_in 3->2, failure
// (one of 3 SIGKILLed).
func (b *torchBench) runEdlLive(ctx context.Context, script, sc string) (torchResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return torchResult{}, err
	}
	ev, world, workers := map[string]string{"scale_out": "join", "scale_in": "leave", "failure": "kill"}[sc], 3, "3->2"
	if sc == "scale_out" {
		world, workers = 2, "2->3"
	}
	line, err := benchTorchLive(ctx, liveBenchConfig{Exe: exe, Python: b.python, Script: script, Scenario: ev, Workers: world,
		Args: []string{"--batch", "48", "--hidden", "1024,1024,256"}, Timeout: b.timeout})
	if err != nil {
		return torchResult{}, err
	}
	survivors := world
	if sc != "scale_out" {
		survivors--
	}
	return torchResult{System: "edl-live", Scenario: sc, StallS: math.Round(line.StallS*1000) / 1000, StepsRedone: line.StepsRedone, Workers: workers,
		Survivors: survivors, SamplesMissed: &line.SamplesMissed, SamplesRepeated: &line.SamplesRepeated}, nil
}
