package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"golang.org/x/term"
)

// terminal says how to draw on an output: colours and live bars only on a
// terminal, and colours not when NO_COLOR is set (https://no-color.org).
type terminal struct {
	tty    bool
	colour bool
	width  int
}

func terminalOf(w io.Writer) terminal {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return terminal{width: 100}
	}
	t := terminal{tty: true, colour: os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb", width: 100}
	if wd, _, err := term.GetSize(int(f.Fd())); err == nil && wd > 20 {
		t.width = wd
	}
	return t
}

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiGrey   = "\x1b[90m"
)

func (t terminal) paint(code, s string) string {
	if !t.colour || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (t terminal) state(st jobs.State) string {
	switch st {
	case jobs.Succeeded:
		return t.paint(ansiGreen, string(st))
	case jobs.Failed:
		return t.paint(ansiRed, string(st))
	case jobs.Running, jobs.Starting:
		return t.paint(ansiBlue, string(st))
	case jobs.Pending, jobs.Suspended, jobs.Cancelling:
		return t.paint(ansiYellow, string(st))
	}
	return t.paint(ansiGrey, string(st))
}

func (t terminal) event(ev jobs.Event) string {
	switch ev.Type {
	case jobs.EventError:
		return t.paint(ansiRed, string(ev.Type))
	case jobs.EventScale:
		return t.paint(ansiYellow, string(ev.Type))
	case jobs.EventState:
		return t.paint(ansiBlue, string(ev.Type))
	}
	return t.paint(ansiGreen, string(ev.Type))
}

// table writes aligned columns (text/tabwriter: the standard library's,
// which is all a fixed set of columns needs). Colour codes are zero-width
// on screen but not to tabwriter; every state's code has the same length
// (5 bytes and the reset), so a column of coloured states stays aligned.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// age is a short duration: 45s, 12m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// totalSamples is how many samples the whole job trains on, when the spec
// says (0 when it does not, as for an exec job without a dataset size).
func totalSamples(j jobs.Job) int64 {
	if b := j.Spec.Trainer.Builtin; b != nil && b.Epochs > 0 && b.Dataset.Samples > 0 {
		return int64(b.Epochs) * int64(b.Dataset.Samples)
	}
	// A live-mode program's samples are the spec's data set times the
	// epochs its loop reported (the spec does not say how many it runs).
	if e := j.Spec.Trainer.Exec; e != nil && e.Dataset != nil && e.Dataset.Samples > 0 && j.Progress.TotalEpochs > 0 {
		return int64(j.Progress.TotalEpochs) * e.Dataset.Samples
	}
	return 0
}

// fraction is how far the job is, in [0, 1], or -1 when unknown.
func fraction(j jobs.Job) float64 {
	if j.State == jobs.Succeeded {
		return 1
	}
	if total := totalSamples(j); total > 0 {
		return min(1, float64(j.Progress.Samples)/float64(total))
	}
	if e := j.Spec.Trainer.Exec; e != nil && e.TotalSteps > 0 {
		return min(1, float64(j.Progress.Step)/float64(e.TotalSteps))
	}
	if j.Progress.TotalEpochs > 0 {
		return min(1, float64(j.Progress.Epoch)/float64(j.Progress.TotalEpochs))
	}
	return -1
}

// eta is the time left at the current rate, or 0 when it cannot be told.
func eta(j jobs.Job) time.Duration {
	total := totalSamples(j)
	if total == 0 || j.Progress.SamplesPerS <= 0 || j.State.Terminal() {
		return 0
	}
	left := float64(total - j.Progress.Samples)
	if left <= 0 {
		return 0
	}
	return time.Duration(left / j.Progress.SamplesPerS * float64(time.Second)).Round(time.Second)
}

func percent(j jobs.Job) string {
	f := fraction(j)
	if f < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

// epochOf is "epoch 2/6" (1-based for people), or "epoch 3" when the total
// is unknown.
func epochOf(j jobs.Job) string {
	total := j.Progress.TotalEpochs
	if total == 0 && j.Spec.Trainer.Builtin != nil {
		total = j.Spec.Trainer.Builtin.Epochs
	}
	ep := min(j.Progress.Epoch+1, max(total, j.Progress.Epoch+1))
	if total > 0 {
		return fmt.Sprintf("epoch %d/%d", ep, total)
	}
	return fmt.Sprintf("epoch %d", ep)
}

// si is a rate with a k/M suffix: 980, 12.3k, 1.20M.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// rateUnit is what Progress.SamplesPerS counts: samples/s, or steps/s
// for a program that reports steps and no samples (docs/exec.md).
func rateUnit(j jobs.Job) string {
	if j.Progress.Samples == 0 && j.Progress.Step > 0 {
		return "steps/s"
	}
	return "samples/s"
}

// statusLine is one job's progress in words, without the bar.
func statusLine(j jobs.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s step %d", j.State, epochOf(j), j.Progress.Step)
	if j.Progress.Step > 0 {
		fmt.Fprintf(&b, "  loss %.4f  %s %s", j.Progress.Loss, si(j.Progress.SamplesPerS), rateUnit(j))
	}
	fmt.Fprintf(&b, "  workers %d/%d", j.Workers.Current, j.Workers.Target)
	if j.Workers.Pinned > 0 {
		fmt.Fprintf(&b, " (pinned %d)", j.Workers.Pinned)
	}
	if f := fraction(j); f >= 0 {
		fmt.Fprintf(&b, "  %.0f%%", 100*f)
	}
	if d := eta(j); d > 0 {
		fmt.Fprintf(&b, "  ETA %s", d)
	}
	if (j.State == jobs.Pending || j.State == jobs.Suspended || j.State.Terminal()) && j.Reason != "" {
		fmt.Fprintf(&b, "  (%s)", j.Reason)
	}
	return b.String()
}
