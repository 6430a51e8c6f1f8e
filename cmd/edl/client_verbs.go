package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/jobs"
)

func init() {
	register(command{name: "submit", summary: "submit a job spec (JSON file, - for stdin); --watch follows it", run: runSubmit})
	register(command{name: "ls", summary: "list your jobs (--status, --label)", run: runLs})
	register(command{name: "get", summary: "show one job", run: runGet})
	register(command{name: "scale", summary: "pin a job to N workers (0 hands it back to the planner)", run: runScale})
	register(command{name: "cancel", summary: "cancel a job", run: runCancel})
	register(command{name: "checkpoints", summary: "list a job's committed checkpoints", run: runCheckpoints})
	register(command{name: "model", summary: "download a checkpoint's model (-o FILE), SHA-256 checked", run: runModel})
}

// labelFlags is a repeatable --label k=v.
type labelFlags []string

func (l *labelFlags) String() string { return strings.Join(*l, ",") }
func (l *labelFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("must be key=value")
	}
	*l = append(*l, v)
	return nil
}

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl submit FILE [--watch] [--idempotency-key K] [-o table|json]"
	fs := newVerb("submit", usage, "Submits the job spec in FILE (JSON; - reads stdin) and prints the job's ID.\nWith --watch it then follows the job like 'edl watch' and exits with the job's status.", stderr, true)
	return submitVerb[jobs.Job]{
		path: "/v1/jobs", what: "a job spec: see examples/job.json",
		watch: fs.Bool("watch", false, "follow the job until it ends (exit 0 succeeded, 3 failed, 4 cancelled)"),
		key:   fs.String("idempotency-key", "", "makes a retried submit return the same job"),
		said: func(j jobs.Job) (string, string, string) {
			return j.ID, string(j.State), j.Spec.Name
		},
		follow: func(c *client, j jobs.Job) error { return watchJob(ctx, c, j.ID, stdout, fs.json()) },
	}.run(ctx, fs, args, stdout)
}

// submitVerb is a verb that submits the spec in its one argument and
// prints what the server made of it, then follows it with --watch.
type submitVerb[T any] struct {
	path, what string // where it is POSTed; what the spec should be, for errors
	// clientFirst opens the client (--server, --token, the client config)
	// before the spec is read, so that their errors come first and stdin
	// is not read in vain (sweep submit); else the spec is read first
	// (submit).
	clientFirst bool
	watch       *bool
	key         *string // the Idempotency-Key, "" for none
	// said is the ID, the state and the summary of what was made.
	said   func(T) (id, state, summary string)
	follow func(*client, T) error
}

// run reads the spec, POSTs it with the idempotency key and prints the
// answer: as sent with -o json, else a line, which says so when the key
// had made it before. With --watch and -o json only the watch's values are
// written (its first is the answer).
func (s submitVerb[T]) run(ctx context.Context, fs *verb, args []string, stdout io.Writer) error {
	pos, err := fs.parse(args, 1)
	if err != nil {
		return err
	}
	var c *client
	if s.clientFirst {
		if c, err = fs.client(); err != nil {
			return err
		}
	}
	body, err := readSpec(fs.name, pos[0], s.what)
	if err != nil {
		return err
	}
	if c == nil {
		if c, err = fs.client(); err != nil {
			return err
		}
	}
	var made T
	raw, replay, err := c.postIdempotent(ctx, s.path, body, *s.key, fs.name, &made)
	if err != nil {
		return err
	}
	id, state, summary := s.said(made)
	switch {
	case fs.json() && !*s.watch:
		_, err = stdout.Write(raw)
		return err
	case fs.json():
	case replay:
		fmt.Fprintf(stdout, "%s already submitted with this idempotency key (%s)\n", id, state)
	default:
		fmt.Fprintf(stdout, "submitted %s (%s)\n", id, summary)
	}
	if !*s.watch {
		return nil
	}
	return s.follow(c, made)
}

// readSpec reads the JSON spec a submit verb is given: the file at path,
// or stdin for -; what says what it should hold, for the error.
func readSpec(verb, path, what string) ([]byte, error) {
	var body []byte
	var err error
	if path == "-" {
		body, err = io.ReadAll(os.Stdin)
	} else {
		body, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageErrorf("%s: %v", verb, err)
	}
	if !json.Valid(body) {
		return nil, usageErrorf("%s: %s is not valid JSON (%s)", verb, path, what)
	}
	return body, nil
}

func runLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl ls [--status S[,S]] [--label k=v]... [-o table|json]"
	var labels labelFlags
	fs := newVerb("ls", usage, "Lists your jobs, newest first.", stderr, true)
	status := fs.String("status", "", "only jobs in these states, comma-separated (pending,running,...)")
	fs.Var(&labels, "label", "only jobs with this label, key=value (repeat for several)")
	limit := fs.Int("limit", 0, "at most this many jobs (0: all)")
	if _, err := fs.parse(args, 0); err != nil {
		return err
	}
	for _, st := range strings.Split(*status, ",") {
		if st = strings.TrimSpace(st); st != "" && !validState(jobs.State(st)) {
			return usageErrorf("ls: --status %q: not a state (pending, starting, running, suspended, cancelling, succeeded, failed, cancelled)", st)
		}
	}
	if *limit < 0 {
		return usageErrorf("ls: --limit %d: must be 0 or more", *limit)
	}
	c, err := fs.client()
	if err != nil {
		return err
	}
	list, err := listJobs(ctx, c, *status, labels, *limit)
	if err != nil {
		return err
	}
	if fs.json() {
		return writeJSONOut(stdout, api.JobList{Jobs: list})
	}
	term, now := terminalOf(stdout), time.Now()
	t := newTable(stdout, "ID", "NAME", "STATE", "WORKERS", "PROGRESS", "LOSS", "SAMPLES/S", "AGE")
	for _, j := range list {
		loss, rate := "-", "-"
		if j.Progress.Step > 0 {
			loss, rate = fmt.Sprintf("%.4f", j.Progress.Loss), si(j.Progress.SamplesPerS)
		}
		t.row(j.ID, j.Spec.Name, term.state(j.State), fmt.Sprintf("%d/%d", j.Workers.Current, j.Workers.Target),
			percent(j), loss, rate, age(now.Sub(j.CreatedAt)))
	}
	return t.flush()
}

func validState(s jobs.State) bool {
	switch s {
	case jobs.Pending, jobs.Starting, jobs.Running, jobs.Suspended, jobs.Cancelling, jobs.Succeeded, jobs.Failed, jobs.Cancelled:
		return true
	}
	return false
}

// listJobs follows the list's cursor until limit jobs (0: all) are read.
func listJobs(ctx context.Context, c *client, status string, labels []string, limit int) ([]jobs.Job, error) {
	out := []jobs.Job{}
	cursor := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(jobs.MaxListLimit)}}
		if status != "" {
			q.Set("status", status)
		}
		for _, l := range labels {
			q.Add("label", l)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page api.JobList
		if err := c.call(ctx, http.MethodGet, "/v1/jobs", q, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Jobs...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		if page.Next == "" {
			return out, nil
		}
		cursor = page.Next
	}
}

func getJob(ctx context.Context, c *client, id string) (jobs.Job, error) {
	return getByID[jobs.Job](ctx, c, jobPath, id)
}

func runGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl get ID [-o table|json]"
	fs := newVerb("get", usage, "Shows one job: state, workers, progress, last checkpoint.", stderr, true)
	c, p, err := fs.openJob(args)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodGet, p, nil, nil, &raw); err != nil {
		return err
	}
	if fs.json() {
		_, err := stdout.Write(raw)
		return err
	}
	var j jobs.Job
	if err := c.decode(raw, &j); err != nil {
		return fmt.Errorf("get: decode the job: %w", err)
	}
	printJob(stdout, terminalOf(stdout), j, time.Now())
	return nil
}

func printJob(w io.Writer, term terminal, j jobs.Job, now time.Time) {
	t := newTable(w, "ID:", j.ID)
	t.row("Name:", j.Spec.Name)
	t.row("Tenant:", j.Tenant)
	t.row("State:", term.state(j.State))
	if j.Reason != "" {
		t.row("Reason:", j.Reason)
	}
	pin := ""
	if j.Workers.Pinned > 0 {
		pin = fmt.Sprintf(", pinned %d", j.Workers.Pinned)
	}
	t.row("Workers:", fmt.Sprintf("%d current, %d target (range %d..%d%s)", j.Workers.Current, j.Workers.Target, j.Spec.Workers.Min, j.Spec.Workers.Max, pin))
	t.row("Trainer:", string(j.Spec.Trainer.Kind))
	t.row("Priority:", string(j.Spec.Priority))
	if j.Spec.Trainer.Kind == jobs.TrainerExec && j.Progress.Step == 0 && j.Progress.Samples == 0 && j.Progress.Epoch == 0 {
		// Not "epoch 1, step 0": the program reported nothing to go by.
		t.row("Progress:", "none reported by the program (steps written to $EDL_METRICS_FILE show here: docs/exec.md)")
	} else {
		t.row("Progress:", fmt.Sprintf("%s, step %d, %d samples (%s)", epochOf(j), j.Progress.Step, j.Progress.Samples, percent(j)))
	}
	if j.Progress.Step > 0 {
		t.row("Loss:", fmt.Sprintf("%.4f", j.Progress.Loss))
		unit := rateUnit(j)
		t.row(strings.ToUpper(unit[:1])+unit[1:]+":", si(j.Progress.SamplesPerS))
	}
	if d := eta(j); d > 0 {
		t.row("ETA:", d.String())
	}
	deadlineRows(t, j, time.Now())
	if ck := j.LastCheckpoint; ck != nil {
		t.row("Checkpoint:", fmt.Sprintf("step %d, epoch %d, %d bytes", ck.Step, ck.Epoch, ck.SizeBytes))
	}
	if len(j.Spec.Labels) > 0 {
		var ls []string
		for k, v := range j.Spec.Labels {
			ls = append(ls, k+"="+v)
		}
		t.row("Labels:", strings.Join(sortedStrings(ls), ", "))
	}
	t.row("Created:", fmt.Sprintf("%s (%s ago)", j.CreatedAt.Local().Format(time.RFC3339), age(now.Sub(j.CreatedAt))))
	t.row("Updated:", j.UpdatedAt.Local().Format(time.RFC3339))
	_ = t.flush()
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for k := i; k > 0 && s[k] < s[k-1]; k-- {
			s[k], s[k-1] = s[k-1], s[k]
		}
	}
	return s
}

func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl scale ID N"
	fs := newVerb("scale", usage, "Pins the job to N workers, within its spec's range; 0 unpins (the planner chooses again).", stderr, true)
	pos, err := fs.parse(args, 2)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 0 {
		return usageErrorf("scale: N %q: must be a number of workers, 0 or more (usage: %s)", pos[1], usage)
	}
	c, p, err := fs.clientAt(pos[0], jobPath, "/scale")
	if err != nil {
		return err
	}
	var j jobs.Job
	if err := c.call(ctx, http.MethodPost, p, nil, api.ScaleRequest{Workers: &n}, &j); err != nil {
		return err
	}
	if fs.json() {
		return writeJSONOut(stdout, j)
	}
	if n == 0 {
		fmt.Fprintf(stdout, "%s unpinned: the planner chooses its size (now %d/%d)\n", j.ID, j.Workers.Current, j.Workers.Target)
	} else {
		fmt.Fprintf(stdout, "%s pinned to %d workers (now %d/%d)\n", j.ID, n, j.Workers.Current, j.Workers.Target)
	}
	return nil
}

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl cancel ID"
	fs := newVerb("cancel", usage, "Cancels the job: it goes cancelling at once and cancelled when its workers are gone.", stderr, true)
	return cancelByID(ctx, fs, args, stdout, jobPath, func(j jobs.Job) (string, string) { return j.ID, string(j.State) })
}

func listCheckpoints(ctx context.Context, c *client, id string) ([]api.Checkpoint, error) {
	p, err := jobPath(id, "/checkpoints")
	if err != nil {
		return nil, err
	}
	var l api.CheckpointList
	if err := c.call(ctx, http.MethodGet, p, nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Checkpoints, nil
}

func runCheckpoints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl checkpoints ID [-o table|json]"
	fs := newVerb("checkpoints", usage, "Lists the job's committed checkpoints, newest first.", stderr, true)
	return callAndShow(ctx, fs, args, stdout, http.MethodGet, jobPath, func(l api.CheckpointList) error {
		t := newTable(stdout, "STEP", "EPOCH", "GENERATION", "WORLD", "SIZE", "CREATED")
		for _, ck := range l.Checkpoints {
			t.row(strconv.FormatInt(ck.Step, 10), strconv.Itoa(ck.Epoch), strconv.FormatInt(ck.Generation, 10),
				strconv.Itoa(ck.WorldSize), strconv.FormatInt(ck.SizeBytes, 10), ck.CreatedAt.Local().Format(time.RFC3339))
		}
		return t.flush()
	}, "/checkpoints")
}

func runModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "edl model ID [--step N] -o FILE"
	fs := newVerb("model", usage, "Downloads the trained parameters of a checkpoint (the newest unless --step) into FILE\n(- for stdout), checking the body against the SHA-256 the checkpoint's manifest records.", stderr, false)
	step := fs.Int64("step", -1, "the checkpoint's step (default: the newest)")
	file := fs.String("o", "", "where to write the model (- for stdout)")
	pos, err := fs.parse(args, 1)
	if err != nil {
		return err
	}
	if *file == "" {
		return usageErrorf("model: -o FILE is required (usage: %s)", usage)
	}
	if *step < -1 { // -1, the default, is the newest; -5 was read as that too
		return usageErrorf("model: --step %d: must be a checkpoint's step, 0 or more (leave it out for the newest)", *step)
	}
	c, err := fs.client()
	if err != nil {
		return err
	}
	if *step < 0 {
		list, err := listCheckpoints(ctx, c, pos[0])
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return &exitError{code: exitAPIError, msg: fmt.Sprintf("model: job %s has no committed checkpoint yet", pos[0])}
		}
		*step = list[0].Step
	}
	p, err := jobPath(pos[0], "/checkpoints/", strconv.FormatInt(*step, 10), "/model")
	if err != nil {
		return err
	}
	resp, err := c.request(ctx, http.MethodGet, p, nil, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	want := resp.Header.Get("X-Checkpoint-SHA256")
	var dst io.Writer = stdout
	var tmp *os.File
	if *file != "-" {
		tmp, err = os.CreateTemp(filepath.Dir(*file), ".edl-model-*")
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		defer os.Remove(tmp.Name()) // after the rename, a no-op
		defer tmp.Close()
		dst = tmp
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), resp.Body)
	if err != nil {
		return fmt.Errorf("model: download step %d: %w", *step, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want != "" && got != want {
		return fmt.Errorf("model: step %d: SHA-256 %s, the manifest says %s: download corrupted, nothing written", *step, got, want)
	}
	if tmp == nil {
		return nil
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := os.Rename(tmp.Name(), *file); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	fmt.Fprintf(stderr, "wrote %s: step %d, %d bytes, sha256 %s\n", *file, *step, n, got)
	return nil
}
