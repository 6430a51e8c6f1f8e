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
}

const exitSuffix = ".exit.json"

func exitPath(logDir, jobID, workerID string) string {
	return filepath.Join(logDir, jobID, workerID+exitSuffix)
}

// recordExit writes a worker's exit record; a failure is logged (the
// worker is then listed as failed with no exit code once its job is gone).
func (c *Cluster) recordExit(jobID string, p *proc, code int) {
	b, _ := json.Marshal(exitRecord{ID: p.id, Index: p.index, Started: p.started, ExitCode: code})
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
// from what LogDir keeps: each worker with a log, complete or failed by
// its exit record (none: the edl dev that ran it was killed; failed, exit
// code unknown). A job with no logs has no workers.
func (c *Cluster) finishedWorkers(jobID string) ([]jobs.Worker, error) {
	if !safeName(jobID) {
		return nil, nil
	}
	dir := filepath.Join(c.cfg.LogDir, jobID)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workers of %s: %w", jobID, err)
	}
	var out []jobs.Worker
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".stdout.log")
		if !ok || !safeName(id) {
			continue
		}
		w := jobs.Worker{ID: id, JobID: jobID, Index: indexOfID(jobID, id), Node: "local", State: jobs.WorkerFailed}
		if b, err := os.ReadFile(filepath.Join(dir, id+exitSuffix)); err == nil {
			var r exitRecord
			if json.Unmarshal(b, &r) == nil && r.ID == id {
				code := r.ExitCode
				w.Index, w.Started, w.ExitCode = r.Index, r.Started, &code
				if code == 0 {
					w.State = jobs.WorkerComplete
				}
			}
		}
		out = append(out, w)
	}
	sortWorkers(out)
	return out, nil
}

// indexOfID reads the index out of a worker ID (<job>-w<index>-<seq>);
// -1 when it has none.
func indexOfID(jobID, id string) int {
	rest, ok := strings.CutPrefix(id, jobID+"-w")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
	if err != nil {
		return -1
	}
	return n
}
