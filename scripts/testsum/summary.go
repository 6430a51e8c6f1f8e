package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output and build-fail
	FailedBuild string
}

// keepLines bounds what is kept of one test's or package's output; the raw
// stream (-json FILE) keeps everything.
const keepLines = 3000

type lines struct {
	l       []string
	dropped int
}

func (b *lines) add(s string) {
	if len(b.l) == keepLines {
		copy(b.l, b.l[1:])
		b.l = b.l[:keepLines-1]
		b.dropped++
	}
	b.l = append(b.l, s)
}

func (b *lines) print(w io.Writer, indent string) {
	if b.dropped > 0 {
		fmt.Fprintf(w, "%s... (%d earlier lines not shown; see the -json file)\n", indent, b.dropped)
	}
	for _, s := range b.l {
		if strings.HasPrefix(s, "=== ") { // RUN, PAUSE, CONT, NAME: noise in a failure report
			continue
		}
		fmt.Fprint(w, indent, s)
		if !strings.HasSuffix(s, "\n") {
			fmt.Fprintln(w)
		}
	}
}

type testResult struct {
	out     lines
	done    bool
	elapsed float64
}

type pkgResult struct {
	name    string
	out     lines // output outside any test
	tests   map[string]*testResult
	action  string // pass, fail, skip; "" while running
	elapsed float64
	failed  []string // tests that failed, in order
	// reasons are the last message lines of each failed test (file:line:
	// text; a t.Fatal ends a test, and errors come after its progress
	// logs), repeated in the closing summary: a CI log that shows only its
	// tail still says what failed, not just the logs dumped after it.
	reasons []string
	noTests bool
	// unfinished says why the package has no result, once its output so
	// far was printed.
	unfinished string
}

// summary follows the stream: it prints as a plain go test would and keeps
// the counts for the closing lines.
type summary struct {
	mu          sync.Mutex // read's goroutine and an interrupt
	stopped     bool       // after an interrupt: ignore what still comes
	w           io.Writer
	start       time.Time
	pkgs        map[string]*pkgResult
	order       []string
	passed      int
	failedN     int
	skipped     int
	slow        []slowTest
	buildFailed bool
}

type slowTest struct {
	name    string
	elapsed float64
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, start: time.Now(), pkgs: map[string]*pkgResult{}}
}

func (s *summary) pkg(name string) *pkgResult {
	p := s.pkgs[name]
	if p == nil {
		p = &pkgResult{name: name, tests: map[string]*testResult{}}
		s.pkgs[name] = p
		s.order = append(s.order, name)
	}
	return p
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		isEvent := len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &e) == nil
		s.mu.Lock()
		switch {
		case s.stopped:
		case isEvent:
			s.handle(e)
		default:
			fmt.Fprintln(s.w, string(line)) // not go test -json: pass it on
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	if !s.stopped {
		s.printUnfinished("the go test -json stream ended while it ran")
	}
	s.mu.Unlock()
	return sc.Err()
}

// interrupt is called when testsum is told to stop before the stream ends.
func (s *summary) interrupt(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.printUnfinished("interrupted (" + why + ") while it ran")
}

// printUnfinished prints what the packages still running said so far.
func (s *summary) printUnfinished(why string) {
	for _, name := range s.order {
		p := s.pkgs[name]
		if p.action != "" || p.unfinished != "" {
			continue
		}
		p.unfinished = why
		fmt.Fprintf(s.w, "--- %s: %s; its output so far:\n", p.name, why)
		p.out.print(s.w, "    ")
		var names []string
		for n, t := range p.tests {
			if !t.done {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(s.w, "--- %s (still running):\n", n)
			p.tests[n].out.print(s.w, "    ")
		}
	}
}

func (s *summary) handle(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.w, e.Output)
		return
	case "build-fail":
		s.buildFailed = true
		return
	}
	if e.Package == "" {
		return
	}
	p := s.pkg(e.Package)
	if e.Test == "" {
		s.handlePackage(p, e)
		return
	}
	t := p.tests[e.Test]
	if t == nil {
		t = &testResult{}
		p.tests[e.Test] = t
	}
	switch e.Action {
	case "output":
		t.out.add(e.Output)
	case "pass", "skip", "fail":
		t.done, t.elapsed = true, e.Elapsed
		top := !strings.Contains(e.Test, "/")
		switch e.Action {
		case "pass":
			if top {
				s.passed++
			}
		case "skip":
			if top {
				s.skipped++
			}
		case "fail":
			if top {
				s.failedN++
			}
			p.failed = append(p.failed, e.Test)
			// A parent's output follows its subtests': print once, at the top.
			if top {
				s.printFailed(p, e.Test)
			}
		}
		if top {
			s.slow = append(s.slow, slowTest{name: short(p.name) + "." + e.Test, elapsed: e.Elapsed})
		}
		if e.Action != "fail" && top {
			s.forget(p, e.Test)
		}
	}
}

// printFailed prints a failed top-level test's output with its subtests'.
func (s *summary) printFailed(p *pkgResult, name string) {
	var names []string
	for n := range p.tests {
		if n == name || strings.HasPrefix(n, name+"/") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		p.tests[n].out.print(s.w, "")
		var msgs []string
		for _, l := range p.tests[n].out.l {
			if isReason(l) {
				msgs = append(msgs, n+": "+clip(strings.TrimSpace(l), reasonChars))
			}
		}
		msgs = msgs[max(0, len(msgs)-reasonsPerTest):]
		p.reasons = append(p.reasons, msgs[:min(len(msgs), maxReasons-len(p.reasons))]...)
	}
	s.forget(p, name)
}

func (s *summary) forget(p *pkgResult, name string) {
	for n, t := range p.tests {
		if (n == name || strings.HasPrefix(n, name+"/")) && t.done {
			delete(p.tests, n)
		}
	}
}

func (s *summary) handlePackage(p *pkgResult, e event) {
	switch e.Action {
	case "output":
		if strings.Contains(e.Output, "[no test files]") {
			p.noTests = true
		}
		p.out.add(e.Output)
	case "pass", "fail", "skip":
		// A package may end twice in one stream (make test runs a few of
		// its tests in a run of their own): a failure stays, the times add.
		if p.action != "fail" {
			p.action = e.Action
		}
		p.elapsed += e.Elapsed
		if e.Action == "fail" && len(p.failed) == 0 {
			// The binary failed with no test failing: killed, os.Exit, a
			// panic, a timeout. Say so and show everything left of it.
			fmt.Fprintf(s.w, "--- %s failed outside any test (its binary was killed, exited or panicked; or it did not build); its output:\n", p.name)
			p.out.print(s.w, "    ")
			for n, t := range p.tests {
				if !t.done {
					fmt.Fprintf(s.w, "--- %s (still running when the package ended):\n", n)
					t.out.print(s.w, "    ")
				}
			}
		} else {
			for _, l := range p.out.l {
				if isResultLine(l) {
					fmt.Fprint(s.w, l)
				}
			}
		}
		p.out = lines{}
		p.tests = map[string]*testResult{}
	}
}

const (
	reasonsPerTest = 4   // a failed test's last message lines in the summary
	maxReasons     = 8   // at most, per package
	reasonChars    = 300 // of each
)

// reasonRE is a test's message line: "    name_test.go:12: text" (t.Error,
// t.Fatal, t.Log: the testing package prints them alike) or a panic.
var reasonRE = regexp.MustCompile(`^\s+\S+\.go:\d+: |^panic: `)

// isReason says whether a test's output line states a failure's cause:
// a message line, but not a log tail a harness dumps after the failure.
func isReason(l string) bool {
	t := strings.TrimRight(l, "\n")
	return reasonRE.MatchString(t) && !strings.HasSuffix(t, "(tail):")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + " ..."
}

// isResultLine is go test's one line per package: ok, FAIL or "?".
func isResultLine(l string) bool {
	return strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "?   \t")
}

func short(pkg string) string {
	if i := strings.Index(pkg, "/edl/"); i >= 0 {
		return pkg[i+len("/edl/"):]
	}
	return pkg
}

func (s *summary) failed() bool {
	if s.buildFailed || s.failedN > 0 {
		return true
	}
	for _, p := range s.pkgs {
		if p.action == "fail" || p.action == "" {
			return true
		}
	}
	return false
}

// finish prints the closing lines; the very last one is the plain
// "tests: N passed, N failed, N skipped".
func (s *summary) finish(slowest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ok, bad, none int
	type failure struct {
		what    string
		reasons []string
	}
	var failedPkgs []failure
	var ran []*pkgResult
	for _, name := range s.order {
		p := s.pkgs[name]
		switch {
		case p.action == "fail" || p.action == "":
			bad++
			what := strings.Join(p.failed, ", ")
			if p.action == "" {
				what = "no result: " + p.unfinished
			} else if what == "" {
				what = "failed outside any test"
			}
			failedPkgs = append(failedPkgs, failure{short(name) + " (" + what + ")", p.reasons})
		case p.noTests:
			none++
		default:
			ok++
		}
		if !p.noTests {
			ran = append(ran, p)
		}
	}
	sort.SliceStable(ran, func(i, j int) bool { return ran[i].elapsed > ran[j].elapsed })
	sort.SliceStable(s.slow, func(i, j int) bool { return s.slow[i].elapsed > s.slow[j].elapsed })
	fmt.Fprintf(s.w, "\n== summary: %d packages: %d ok, %d failed, %d without tests; %.1f min\n",
		len(s.order), ok, bad, none, time.Since(s.start).Minutes())
	if s.buildFailed {
		fmt.Fprintln(s.w, "build failed: see the errors above")
	}
	for _, f := range failedPkgs {
		fmt.Fprintf(s.w, "FAILED %s\n", f.what)
		for _, r := range f.reasons {
			fmt.Fprintf(s.w, "    %s\n", r)
		}
	}
	if slowest > 0 {
		fmt.Fprint(s.w, "slowest packages:")
		for i, p := range ran {
			if i == slowest {
				break
			}
			fmt.Fprintf(s.w, " %s %.0fs", short(p.name), p.elapsed)
		}
		fmt.Fprint(s.w, "\nslowest tests:")
		for i, t := range s.slow {
			if i == slowest {
				break
			}
			fmt.Fprintf(s.w, " %s %.0fs", t.name, t.elapsed)
		}
		fmt.Fprintln(s.w)
	}
	fmt.Fprintf(s.w, "tests: %d passed, %d failed, %d skipped\n", s.passed, s.failedN, s.skipped)
}

// printPackages lists every package that ran tests: minutes and result,
// slowest first.
func (s *summary) printPackages(w io.Writer) {
	var ran []*pkgResult
	for _, name := range s.order {
		if p := s.pkgs[name]; !p.noTests {
			ran = append(ran, p)
		}
	}
	sort.SliceStable(ran, func(i, j int) bool { return ran[i].elapsed > ran[j].elapsed })
	for _, p := range ran {
		result := p.action
		if result == "" {
			result = "no result"
		}
		fmt.Fprintf(w, "%5.1f min  %-4s  %s\n", p.elapsed/60, result, short(p.name))
	}
}
