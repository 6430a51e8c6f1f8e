package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/schollz/progressbar/v3"
)

func init() {
	register(command{name: "watch", summary: "follow a job live (progress bar, events) until it ends; exits with its status", run: runWatch})
	register(command{name: "events", summary: "a job's event log (-f follows it)", run: runEvents})
	register(command{name: "logs", summary: "a job's program output (exec mode; -f follows, --worker W)", run: runLogs})
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	id, event, data string
}

// maxEventBytes bounds one event's data: the API's largest event is a
// job's error with its last stderr lines, far below it.
const maxEventBytes = 4 << 20

// readSSE calls fn for each event of an text/event-stream body until it
// ends, fn fails, or ctx ends.
func readSSE(ctx context.Context, body io.Reader, fn func(sseEvent) error) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev sseEvent
	var data []string
	size := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				ev.data = strings.Join(data, "\n")
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data, size = sseEvent{}, nil, 0
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: keep-alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			if size += len(value); size > maxEventBytes {
				return fmt.Errorf("an event of the stream is over %d bytes: not an event of this API", maxEventBytes)
			}
			data = append(data, value)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}

// followEvents streams a job's events after `after` ("" = from the first)
// and calls fn for each, reconnecting with Last-Event-ID when the stream
// breaks, until the server ends it after the job's final state (nil), ctx
// ends, or the API refuses (its error).
func followEvents(ctx context.Context, c *client, id, after string, fn func(jobs.Event) error) error {
	p, err := jobPath(id, "/events")
	if err != nil {
		return err
	}
	last := after
	for {
		hdr := map[string]string{"Accept": "text/event-stream"}
		if last != "" {
			hdr["Last-Event-ID"] = last
		}
		resp, err := c.request(ctx, http.MethodGet, p, url.Values{"follow": {"true"}}, nil, hdr)
		var ae *apiError
		if errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable && ae.Status != http.StatusTooManyRequests || errors.Is(err, errRedirect) {
			return err // refused, or sent elsewhere: retrying changes nothing
		}
		done := false
		if err == nil {
			serr := readSSE(ctx, resp.Body, func(se sseEvent) error {
				var ev jobs.Event
				if err := c.decode([]byte(se.data), &ev); err != nil {
					return fmt.Errorf("event %s: %w", se.id, err)
				}
				last = ev.ID
				if ev.Type == jobs.EventState {
					if to, _ := ev.Data["to"].(string); jobs.State(to).Terminal() {
						done = true
					}
				}
				return fn(ev)
			})
			resp.Body.Close()
			if serr != nil && ctx.Err() == nil && !isTransient(serr) {
				return serr
			}
		}
		if done {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The stream ended without the final state: the server restarted, a
		// proxy cut it, or the job ended before we attached (then the next
		// request returns at once with nothing new). Check, then resume.
		if j, gerr := getJob(ctx, c, id); gerr == nil && j.State.Terminal() {
			evs, err := eventPage(ctx, c, id, last)
			for _, ev := range evs {
				if err := fn(ev); err != nil {
					return err
				}
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// isTransient reports whether a stream error is a broken connection (read
// again) rather than a bad event.
func isTransient(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "connection reset") ||
		errors.Is(err, context.DeadlineExceeded)
}

// eventPage reads every event after `after`, page by page.
func eventPage(ctx context.Context, c *client, id, after string) ([]jobs.Event, error) {
	p, err := jobPath(id, "/events")
	if err != nil {
		return nil, err
	}
	var out []jobs.Event
	for {
		q := url.Values{"limit": {"500"}}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Events []jobs.Event `json:"events"`
			Next   string       `json:"next"`
		}
		if err := c.call(ctx, http.MethodGet, p, q, nil, &page); err != nil {
			return out, err
		}
		out = append(out, page.Events...)
		if len(page.Events) < 500 {
			return out, nil
		}
		after = page.Next
	}
}

func eventLine(term terminal, ev jobs.Event) string {
	pad := strings.Repeat(" ", max(0, 10-len(ev.Type))) // after the colour codes, which take no room
	return fmt.Sprintf("%s  %s%s  %s", ev.Time.Local().Format("15:04:05"), term.event(ev), pad, ev.Message)
}

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl events ID [-f] [-o table|json]"
	fs := newVerb("events", usage, "Prints the job's event log: state changes, scaling decisions with their reason, worker joins\nand leaves, checkpoints, errors. -f follows it until the job ends. -o json prints one JSON\nevent per line.", stderr, true)
	follow := fs.Bool("f", false, "follow: print events as they happen until the job ends")
	c, pos, err := fs.open(args, 1)
	if err != nil {
		return err
	}
	term := terminalOf(stdout)
	print := func(ev jobs.Event) error {
		if fs.json() {
			b, _ := json.Marshal(ev)
			_, err := fmt.Fprintf(stdout, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintln(stdout, eventLine(term, ev))
		return err
	}
	if *follow {
		return followEvents(ctx, c, pos[0], "", print)
	}
	evs, err := eventPage(ctx, c, pos[0], "")
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := print(ev); err != nil {
			return err
		}
	}
	return nil
}

func runLogs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl logs ID [-f] [--worker W] [--stream stdout|stderr] [--tail N]"
	fs := newVerb("logs", usage, "Prints the output of the job's program (exec mode) from one worker (default: the server's\nchoice, the first). -f follows it. The bytes are printed as the program wrote them, escape\nsequences included (as kubectl logs does); pipe through cat -v to see them.", stderr, false)
	follow := fs.Bool("f", false, "follow the output as it is written")
	worker := fs.String("worker", "", "the worker's ID (see the job's events)")
	stream := fs.String("stream", "stdout", "stdout or stderr")
	tail := fs.Int("tail", -1, "only the last N lines (default: all)")
	pos, err := fs.parse(args, 1)
	if err != nil {
		return err
	}
	if *stream != "stdout" && *stream != "stderr" {
		return usageErrorf("logs: --stream %q: must be stdout or stderr", *stream)
	}
	c, p, err := fs.clientAt(pos[0], jobPath, "/logs")
	if err != nil {
		return err
	}
	q := url.Values{"stream": {*stream}}
	if *worker != "" {
		q.Set("worker", *worker)
	}
	if *tail >= 0 {
		q.Set("tail", strconv.Itoa(*tail))
	}
	if *follow {
		q.Set("follow", "true")
	}
	rctx := ctx
	if !*follow {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}
	resp, err := c.request(rctx, http.MethodGet, p, q, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(stdout, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs: %w", err)
	}
	return nil
}

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl watch ID [-o table|json]"
	fs := newVerb("watch", usage, "Follows a job until it ends: a live line with its state, epoch and step, a progress bar\nwith the time left, loss, samples/s and workers current/target, and each event (resize,\nworker join or leave, checkpoint) as it happens. Exits 0 when the job succeeded, 3 when it\nfailed, 4 when it was cancelled. -o json prints JSON lines instead.", stderr, true)
	c, pos, err := fs.open(args, 1)
	if err != nil {
		return err
	}
	return watchJob(ctx, c, pos[0], stdout, fs.json())
}

// watchPoll is how often watch reads the job's progress (which is not an
// event: workers overwrite it a few times a second).
const watchPoll = 500 * time.Millisecond

// watchJob follows the job's events and progress until it ends, then
// returns its exit status: nil when it succeeded, an *exitError otherwise.
func watchJob(ctx context.Context, c *client, id string, stdout io.Writer, jsonOut bool) error {
	j, err := getJob(ctx, c, id)
	if err != nil {
		return err
	}
	var v watchView
	switch {
	case jsonOut:
		v = &jsonView{w: stdout}
	case terminalOf(stdout).tty:
		v = newBarView(stdout, terminalOf(stdout))
	default:
		v = &lineView{w: stdout}
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	evc := make(chan jobs.Event, 256)
	errc := make(chan error, 1)
	go func() {
		errc <- followEvents(sctx, c, id, "", func(ev jobs.Event) error {
			select {
			case evc <- ev:
				return nil
			case <-sctx.Done():
				return sctx.Err()
			}
		})
		close(evc)
	}()
	v.progress(j)
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	streamDone := false
	for {
		select {
		case <-ctx.Done():
			v.close()
			return ctx.Err()
		case ev, ok := <-evc:
			if !ok {
				evc = nil
				streamDone = true
				if err := <-errc; err != nil && ctx.Err() == nil {
					v.close()
					return err
				}
				continue
			}
			v.event(ev)
		case <-tick.C:
			cur, err := getJob(ctx, c, id)
			if err != nil {
				if ctx.Err() != nil || isAPIError(err, http.StatusNotFound) {
					v.close()
					return err
				}
				continue // transient: the next tick retries
			}
			j = cur
			// Print the final state once every event up to it is out.
			if j.State.Terminal() && streamDone {
				v.progress(j)
				v.finish(j)
				return jobExit(j)
			}
			v.progress(j)
		}
	}
}

// jobExit is watch's exit status for a finished job.
func jobExit(j jobs.Job) error {
	switch j.State {
	case jobs.Succeeded:
		return nil
	case jobs.Cancelled:
		return &exitError{code: exitCancelled, msg: fmt.Sprintf("job %s was cancelled: %s", j.ID, j.Reason)}
	}
	return &exitError{code: exitJobFailed, msg: fmt.Sprintf("job %s %s: %s", j.ID, j.State, j.Reason)}
}

// watchView draws what watch sees.
type watchView interface {
	progress(jobs.Job)
	event(jobs.Event)
	finish(jobs.Job)
	close()
}

// barView is a terminal: one live line with a progress bar (drawn by
// schollz/progressbar, which fits it to the width and redraws it in
// place), events printed above it as they come.
type barView struct {
	w    io.Writer
	term terminal
	bar  *progressbar.ProgressBar
}

const barMax = 1000 // the bar counts thousandths of the job

func newBarView(w io.Writer, term terminal) *barView {
	bar := progressbar.NewOptions(barMax,
		progressbar.OptionSetWriter(w),
		progressbar.OptionEnableColorCodes(term.colour),
		progressbar.OptionSetWidth(24),
		progressbar.OptionSetPredictTime(false), // the ETA is the workers' rate's, in the description
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionSetTheme(progressbar.Theme{Saucer: "█", SaucerPadding: "░", BarStart: "", BarEnd: ""}),
	)
	return &barView{w: w, term: term, bar: bar}
}

func (b *barView) progress(j jobs.Job) {
	desc := fmt.Sprintf("%s %s step %d", b.term.state(j.State), epochOf(j), j.Progress.Step)
	if j.Progress.Step > 0 {
		desc += fmt.Sprintf(" loss %.4f %s/s", j.Progress.Loss, si(j.Progress.SamplesPerS))
	}
	desc += fmt.Sprintf(" workers %d/%d", j.Workers.Current, j.Workers.Target)
	if d := eta(j); d > 0 {
		desc += " ETA " + d.String()
	}
	b.bar.Describe(desc)
	if f := fraction(j); f >= 0 && j.State != jobs.Succeeded {
		_ = b.bar.Set(min(barMax-1, int(f*barMax))) // full only on success
	}
}

func (b *barView) event(ev jobs.Event) {
	_ = b.bar.Clear()
	fmt.Fprintln(b.w, eventLine(b.term, ev))
	_ = b.bar.RenderBlank()
}

func (b *barView) finish(j jobs.Job) {
	if j.State == jobs.Succeeded {
		_ = b.bar.Finish()
	} else {
		_ = b.bar.Exit()
	}
	fmt.Fprintf(b.w, "\n%s %s after %s: %s\n", j.ID, b.term.state(j.State), j.UpdatedAt.Sub(j.CreatedAt).Round(time.Second), statusLine(j))
}

func (b *barView) close() { _ = b.bar.Exit(); fmt.Fprintln(b.w) }

// lineView is a pipe or file: a status line when it changes (at most every
// 5 s unless the state changes), and every event.
type lineView struct {
	w         io.Writer
	last      string
	lastState jobs.State
	lastAt    time.Time
}

func (l *lineView) progress(j jobs.Job) {
	s := statusLine(j)
	if s == l.last || (j.State == l.lastState && time.Since(l.lastAt) < 5*time.Second) {
		return
	}
	fmt.Fprintf(l.w, "%s  %s  %s\n", time.Now().Format("15:04:05"), j.ID, s)
	l.last, l.lastState, l.lastAt = s, j.State, time.Now()
}

func (l *lineView) event(ev jobs.Event) { fmt.Fprintln(l.w, eventLine(terminal{}, ev)) }

func (l *lineView) finish(j jobs.Job) {
	fmt.Fprintf(l.w, "%s %s after %s: %s\n", j.ID, j.State, j.UpdatedAt.Sub(j.CreatedAt).Round(time.Second), statusLine(j))
}

func (l *lineView) close() {}

// jsonView prints JSON lines: {"progress": job} and {"event": event}.
type jsonView struct {
	w       io.Writer
	version int64
}

func (v *jsonView) progress(j jobs.Job) {
	if j.Version == v.version {
		return
	}
	v.version = j.Version
	b, _ := json.Marshal(map[string]any{"progress": j})
	fmt.Fprintf(v.w, "%s\n", b)
}

func (v *jsonView) event(ev jobs.Event) {
	b, _ := json.Marshal(map[string]any{"event": ev})
	fmt.Fprintf(v.w, "%s\n", b)
}

func (v *jsonView) finish(jobs.Job) {}
func (v *jsonView) close()          {}
