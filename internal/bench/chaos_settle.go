package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/internal/periodic"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker"
	"github.com/edl-nomad/edl/worker/coord"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// settle waits for the scenario's jobs to end, checks the samples of those
// that succeeded, and cancels what is left so the next scenario starts clear.
func (ch *chaos) settle(ctx context.Context, scenario string, row *chaosRow, ids []string) error {
	deadline := time.Now().Add(ch.wait)
	var states map[string]jobs.Job
	for {
		var err error
		if states, err = ch.list(ctx, scenario); err != nil {
			return err
		}
		done := 0
		for _, id := range ids {
			if j, ok := states[id]; ok && j.State.Terminal() {
				done++
			}
		}
		if done == len(ids) || time.Now().After(deadline) {
			break
		}
		if !pause(ctx, 500*time.Millisecond) {
			return ctx.Err()
		}
	}
	var left []string
	for _, id := range ids {
		j := states[id]
		switch j.State {
		case jobs.Succeeded:
			row.Succeeded++
			if err := ch.checkSamples(ctx, row, id); err != nil {
				return err
			}
		case jobs.Cancelled:
			row.Cancelled++
		case jobs.Failed:
			row.Failed++
		default:
			row.Unfinished++
			left = append(left, id)
		}
	}
	for _, id := range left {
		ch.c.do(ctx, http.MethodDelete, "/v1/jobs/"+id, nil, nil)
	}
	if len(left) > 0 { // give the leftovers a moment to go, not counted
		end := time.Now().Add(30 * time.Second)
		for time.Now().Before(end) && !ch.allTerminal(ctx, left) {
			pause(ctx, 500*time.Millisecond)
		}
	}
	return nil
}

// checkSamples counts the samples a succeeded job missed or repeated.
func (ch *chaos) checkSamples(ctx context.Context, row *chaosRow, id string) error {
	v, ok := ch.specs.Load(id)
	if !ok {
		return nil
	}
	b := v.(jobs.Spec).Trainer.Builtin
	recs, err := datapipe.New(ch.d.RDB, coord.NewKeys("edl:", id), "chaos").DebugRecords(ctx)
	if err != nil {
		return err
	}
	missed, repeated, err := worker.CheckSamples(recs, b.Dataset, b.Epochs)
	if err != nil {
		return fmt.Errorf("samples of %s: %w", id, err)
	}
	row.SamplesChecked++
	row.Missed += missed
	row.Repeated += repeated
	return nil
}

// list reads the scenario's jobs through the API (label chaos=scenario).
func (ch *chaos) list(ctx context.Context, scenario string) (map[string]jobs.Job, error) {
	out := map[string]jobs.Job{}
	cursor := ""
	for {
		path := "/v1/jobs?limit=500&label=" + url.QueryEscape("chaos="+scenario)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Jobs []jobs.Job `json:"jobs"`
			Next string     `json:"next"`
		}
		code, err := ch.c.do(ctx, http.MethodGet, path, nil, &page)
		if code != http.StatusOK {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A 503 while Redis is restarting: read again shortly.
			_ = err
			pause(ctx, 200*time.Millisecond)
			continue
		}
		for _, j := range page.Jobs {
			out[j.ID] = j
		}
		if page.Next == "" {
			return out, nil
		}
		cursor = page.Next
	}
}

func (ch *chaos) allTerminal(ctx context.Context, ids []string) bool {
	for _, id := range ids {
		var j jobs.Job
		if code, _ := ch.c.do(ctx, http.MethodGet, "/v1/jobs/"+id, nil, &j); code != http.StatusOK || !j.State.Terminal() {
			return false
		}
	}
	return true
}

// stepping says whether the job is running and has applied a step.
func (ch *chaos) stepping(ctx context.Context, id string) bool {
	var j jobs.Job
	code, _ := ch.c.do(ctx, http.MethodGet, "/v1/jobs/"+id, nil, &j)
	return code == http.StatusOK && j.State == jobs.Running && j.Progress.Step > 0
}

// workerPids lists the edl worker processes of these jobs (children of this
// edl dev: their command line names its Redis).
func (ch *chaos) workerPids(ids []string) []int {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	redisURL := ch.d.Redis.URL()
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		isWorker, ours, job := false, false, ""
		for i, a := range argv {
			switch {
			case a == "worker" && i == 1:
				isWorker = true
			case a == "--job" && i+1 < len(argv):
				job = argv[i+1]
			case a == "--redis" && i+1 < len(argv):
				ours = argv[i+1] == redisURL
			}
		}
		if isWorker && ours && want[job] {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// pause sleeps d unless ctx ends first; false when it did.
func pause(ctx context.Context, d time.Duration) bool { return periodic.Sleep(ctx, d) == nil }
