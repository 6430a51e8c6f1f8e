package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/sweep"
)

func init() {
	register(command{name: "sweep", summary: "hyperparameter sweeps: edl sweep submit|get|ls|watch|cancel", run: runSweepVerb})
}

const sweepUsage = "edl sweep submit FILE | get ID | ls | watch ID | cancel ID  [flags]"

func runSweepVerb(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(stderr, "usage: %s\n\n  submit   submit a sweep spec (JSON file, - for stdin; see examples/sweep.json); --watch follows it\n  get      show a sweep: its trials and the best one\n  ls       list your sweeps\n  watch    show the trials table live until the sweep ends\n  cancel   cancel a sweep and every trial\n", sweepUsage)
		if len(args) == 0 {
			return usageErrorf("sweep: name a verb (usage: %s)", sweepUsage)
		}
		return nil
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "submit":
		return runSweepSubmit(ctx, rest, stdout, stderr)
	case "get":
		return runSweepGet(ctx, rest, stdout, stderr)
	case "ls":
		return runSweepLs(ctx, rest, stdout, stderr)
	case "watch":
		return runSweepWatch(ctx, rest, stdout, stderr)
	case "cancel":
		return runSweepCancel(ctx, rest, stdout, stderr)
	}
	return usageErrorf("sweep: unknown verb %q (usage: %s)", verb, sweepUsage)
}

// sweepPath is /v1/sweeps/<id> with the ID checked.
func sweepPath(id string, rest ...string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/?#% ") {
		return "", usageErrorf("sweep ID %q: not a sweep ID (see 'edl sweep ls')", id)
	}
	return "/v1/sweeps/" + id + strings.Join(rest, ""), nil
}

func runSweepSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl sweep submit FILE [--watch] [--idempotency-key K] [-o table|json]"
	fs := newVerb("sweep submit", usage, "Submits the sweep spec in FILE (JSON; - reads stdin) and prints the sweep's ID.", stderr, true)
	return submitVerb[sweep.Sweep]{
		path: "/v1/sweeps", what: "a sweep spec: see examples/sweep.json", clientFirst: true,
		watch: fs.Bool("watch", false, "follow the sweep until it ends, like 'edl sweep watch'"),
		key:   fs.String("idempotency-key", "", "makes a retried submit return the same sweep"),
		said: func(sw sweep.Sweep) (string, string, string) {
			return sw.ID, string(sw.State), fmt.Sprintf("%s, %d trials", sw.Spec.Name, len(sw.Trials))
		},
		follow: func(c *client, sw sweep.Sweep) error {
			return watchSweep(ctx, c, sw.ID, stdout, fs.json(), time.Second)
		},
	}.run(ctx, fs, args, stdout)
}

func getSweep(ctx context.Context, c *client, id string) (sweep.Sweep, error) {
	return getByID[sweep.Sweep](ctx, c, sweepPath, id)
}

func runSweepGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl sweep get ID [-o table|json]"
	fs := newVerb("sweep get", usage, "Shows a sweep: every trial with its parameters, state, rung, newest metric and workers, and the best trial.", stderr, true)
	return callAndShow(ctx, fs, args, stdout, http.MethodGet, sweepPath, func(sw sweep.Sweep) error {
		return printSweep(stdout, terminalOf(stdout), sw)
	})
}

// printSweep writes the sweep's summary and its trials table.
func printSweep(w io.Writer, term terminal, sw sweep.Sweep) error {
	counts := sw.TrialCounts()
	var cs []string
	for _, st := range []sweep.TrialState{sweep.TrialRunning, sweep.TrialPending, sweep.TrialCompleted, sweep.TrialCut, sweep.TrialFailed, sweep.TrialCancelled} {
		if counts[st] > 0 {
			cs = append(cs, fmt.Sprintf("%d %s", counts[st], st))
		}
	}
	fmt.Fprintf(w, "%s  %s  %s  (%s)\n", sw.ID, sw.Spec.Name, sw.State, strings.Join(cs, ", "))
	m := sw.Spec.Metric
	if b := sw.Best; b != nil {
		fmt.Fprintf(w, "best: trial %d, %s %.4g at rung %d  %s\n", b.Trial, m.Name, b.Metric, b.Rung, formatParams(b.Params))
	}
	t := newTable(w, "TRIAL", "STATE", "RUNG", "WORKERS", strings.ToUpper(m.Name), "STEP", "JOB", "PARAMETERS")
	for _, tr := range sw.Trials {
		metric, step, workers, rung := "-", "-", "-", "-"
		if tr.LastMetric != nil {
			metric, step = fmt.Sprintf("%.4f", tr.LastMetric.Value), strconv.FormatInt(tr.LastMetric.Step, 10)
			if !jobs.Finite(tr.LastMetric.Value) {
				metric = jobs.NonFiniteName(tr.LastMetric.Value) // a diverged loss: NaN, Infinity, -Infinity
			}
		}
		if tr.Workers > 0 {
			workers = strconv.Itoa(tr.Workers)
		}
		if tr.Rung >= 0 {
			rung = strconv.Itoa(tr.Rung)
		}
		st := string(tr.State)
		switch tr.State {
		case sweep.TrialCut, sweep.TrialCancelled:
			st = term.paint(ansiGrey, st)
		case sweep.TrialFailed:
			st = term.paint(ansiRed, st)
		case sweep.TrialRunning:
			st = term.paint(ansiBlue, st)
		case sweep.TrialCompleted:
			st = term.paint(ansiGreen, st)
		}
		idx := strconv.Itoa(tr.Index)
		if sw.Best != nil && sw.Best.Trial == tr.Index {
			idx += "*"
		}
		job := tr.JobID
		if job == "" {
			job = "-"
		}
		t.row(idx, st, rung, workers, metric, step, job, formatParams(tr.Params))
	}
	return t.flush()
}

// formatParams writes parameters as k=v, sorted, numbers short.
func formatParams(p map[string]any) string {
	ks := make([]string, 0, len(p))
	for k := range p {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var out []string
	for _, k := range ks {
		v := p[k]
		s := sweep.Format(v)
		if f, ok := v.(float64); ok && f != float64(int64(f)) {
			s = strconv.FormatFloat(f, 'g', 4, 64)
		}
		out = append(out, strings.TrimPrefix(k, "trainer.builtin.")+"="+s)
	}
	return strings.Join(out, " ")
}

func runSweepLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl sweep ls [--limit N] [-o table|json]"
	fs := newVerb("sweep ls", usage, "Lists your sweeps, newest first.", stderr, true)
	limit := fs.Int("limit", 0, "at most this many sweeps (0: all)")
	c, _, err := fs.open(args, 0)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usageErrorf("sweep ls: --limit %d: must be 0 or more", *limit)
	}
	var all []sweep.Sweep
	next := ""
	for {
		q := url.Values{"limit": {"500"}}
		if next != "" {
			q.Set("next", next)
		}
		var page api.SweepList
		if err := c.call(ctx, http.MethodGet, "/v1/sweeps", q, nil, &page); err != nil {
			return err
		}
		all = append(all, page.Sweeps...)
		if page.Next == "" || (*limit > 0 && len(all) >= *limit) {
			break
		}
		next = page.Next
	}
	if *limit > 0 && len(all) > *limit {
		all = all[:*limit]
	}
	if fs.json() {
		return writeJSONOut(stdout, api.SweepList{Sweeps: all})
	}
	now := time.Now()
	t := newTable(stdout, "ID", "NAME", "STATE", "TRIALS", "RUNNING", "BEST", "AGE")
	for _, sw := range all {
		running, ended := 0, 0
		for _, tr := range sw.Trials {
			if tr.State == sweep.TrialRunning {
				running++
			}
			if tr.State.Ended() {
				ended++
			}
		}
		best := "-"
		if sw.Best != nil {
			best = fmt.Sprintf("trial %d: %.4g", sw.Best.Trial, sw.Best.Metric)
		}
		t.row(sw.ID, sw.Spec.Name, string(sw.State), fmt.Sprintf("%d/%d", ended, len(sw.Trials)), strconv.Itoa(running), best, age(now.Sub(sw.CreatedAt)))
	}
	return t.flush()
}

func runSweepWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl sweep watch ID [--every D] [-o table|json]"
	fs := newVerb("sweep watch", usage, "Shows the trials table live (redrawn in place on a terminal; piped, printed again on every change; -o json: a JSON line per change) until the sweep ends. Exit 0 when it succeeded, 4 when it was cancelled.", stderr, true)
	every := fs.Duration("every", time.Second, "how often to read the sweep")
	c, pos, err := fs.open(args, 1)
	if err != nil {
		return err
	}
	if *every <= 0 {
		return usageErrorf("sweep watch: --every %s: must be positive", *every)
	}
	return watchSweep(ctx, c, pos[0], stdout, fs.json(), *every)
}

// watchSweep polls the sweep and shows it on every change until it ends.
func watchSweep(ctx context.Context, c *client, id string, w io.Writer, asJSON bool, every time.Duration) error {
	term := terminalOf(w)
	var last int64 = -1
	for {
		sw, err := getSweep(ctx, c, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if sw.Version != last {
			last = sw.Version
			switch {
			case asJSON:
				if err := writeJSONOut(w, sw); err != nil {
					return err
				}
			case term.tty:
				fmt.Fprint(w, "\x1b[H\x1b[2J")
				_ = printSweep(w, term, sw)
			default:
				_ = printSweep(w, term, sw)
				fmt.Fprintln(w)
			}
		}
		switch sw.State {
		case sweep.Succeeded:
			return nil
		case sweep.Cancelled:
			return &exitError{code: exitCancelled, msg: fmt.Sprintf("sweep %s was cancelled", sw.ID)}
		}
		if periodic.Sleep(ctx, every) != nil {
			return nil
		}
	}
}

func runSweepCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl sweep cancel ID"
	fs := newVerb("sweep cancel", usage, "Cancels the sweep: it goes cancelling at once, every trial's job is cancelled, and it is cancelled when they are gone.", stderr, true)
	return cancelByID(ctx, fs, args, stdout, sweepPath, func(sw sweep.Sweep) (string, string) { return sw.ID, string(sw.State) })
}
