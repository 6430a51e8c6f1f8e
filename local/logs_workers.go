package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/edl-nomad/edl/jobs"
)

// exitRecord is what the cluster keeps of a worker once it exited, beside
// its logs (<logDir>/<job>/<workerID>.exit.json), so that a finished job
// still lists its workers after the cluster let it go, and after a restart
// of edl dev: as long as the logs are kept.
type exitRecord struct {
	ID       string    `json:"id"`
	Index    int       `json:"index"`
	Started  time.Time `json:"started"`
	ExitCode int       `json:"exit_code"`
	// Interrupted: the cluster stopped it because it was itself closing
	// (edl dev stopped), not because its job ended or shrank.
	Interrupted bool `json:"interrupted,omitempty"`
	// Left: it went while its job went on (drained by a scale-down,
	// replaced, or failed and restarted by the cluster).
	Left bool `json:"left,omitempty"`
}

const exitSuffix = ".exit.json"

func exitPath(logDir, jobID, workerID string) string {
	return filepath.Join(logDir, jobID, workerID+exitSuffix)
}

// recordExit writes a worker's exit record; a failure is logged (the
// worker is then listed as failed with no exit code once its job is gone).
func (c *Cluster) recordExit(jobID string, p *proc, code int, interrupted, left bool) {
	b, _ := json.Marshal(exitRecord{ID: p.id, Index: p.index, Started: p.started, ExitCode: code, Interrupted: interrupted, Left: left})
	path := exitPath(c.cfg.LogDir, jobID, p.id)
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, b, 0o644)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		c.log.Warn("worker exit record", "job", jobID, "worker", p.id, "err", err)
	}
}

// finishedWorkers lists the workers of a job the cluster no longer runs,
// from what LogDir keeps: each worker with a log and an exit record,
// complete or failed by its exit code. A worker whose edl dev stopped
// under it (an interrupted record), or was killed (no record), or that
// left while its job went on (drained, replaced, failed and restarted: a
// left record), did not end with its job: it is left out, so that a job still running when edl
// dev stopped has no workers here, and the planner places it again (it
// resumes from its checkpoint) instead of settling it as failed. Its logs
// stay readable. A job with no logs has no workers.
func (c *Cluster) finishedWorkers(jobID string) ([]jobs.Worker, error) {
	var out []jobs.Worker
	err := c.eachLoggedWorker(jobID, func(id string) {
		b, err := os.ReadFile(filepath.Join(c.cfg.LogDir, jobID, id+exitSuffix))
		if err != nil {
			return
		}
		var r exitRecord
		if json.Unmarshal(b, &r) != nil || r.ID != id || r.Interrupted || r.Left {
			return
		}
		code := r.ExitCode
		w := jobs.Worker{ID: id, JobID: jobID, Index: r.Index, Node: "local", Started: r.Started, ExitCode: &code, State: jobs.WorkerFailed}
		if code == 0 {
			w.State = jobs.WorkerComplete
		}
		out = append(out, w)
	})
	if err != nil {
		return nil, err
	}
	sortWorkers(out)
	return out, nil
}

// lastSeq is the highest sequence number of the job's workers that LogDir
// keeps logs of (IDs are <job>-w<index>-<seq>), 0 for none.
func (c *Cluster) lastSeq(jobID string) int {
	last := 0
	_ = c.eachLoggedWorker(jobID, func(id string) {
		rest, _ := strings.CutPrefix(id, jobID+"-w")
		if _, seq, ok := strings.Cut(rest, "-"); ok {
			if n, err := strconv.Atoi(seq); err == nil {
				last = max(last, n)
			}
		}
	})
	return last
}

// eachLoggedWorker calls f with the ID of every worker of the job that
// LogDir keeps a log of.
func (c *Cluster) eachLoggedWorker(jobID string, f func(id string)) error {
	if !safeName(jobID) {
		return nil
	}
	ents, err := os.ReadDir(filepath.Join(c.cfg.LogDir, jobID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("workers of %s: %w", jobID, err)
	}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".stdout.log"); ok && safeName(id) {
			f(id)
		}
	}
	return nil
}
