package sim

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/edl-nomad/edl/internal/csvhead"
	"github.com/edl-nomad/edl/jobs"
)

// TraceJob is one row of a trace: a job submitted at Submit seconds that
// ran Duration seconds on GPUs GPUs.
type TraceJob struct {
	ID       string
	Tenant   string
	Submit   float64 // seconds since the trace's first job
	GPUs     int
	Duration float64 // seconds at GPUs GPUs
	// Priority is guaranteed unless the trace's priority column says
	// opportunistic (a job that only harvests idle GPUs).
	Priority jobs.Priority
}

// ReadTrace reads a CSV trace with at least the columns job_id, submit_s,
// num_gpus and duration_s, in any order; optional columns are vc (the
// tenant; tenant is accepted too) and priority (guaranteed or
// opportunistic; empty means guaranteed). Other columns are ignored. Jobs
// come back sorted by submission time then ID. Rows with no GPUs or no
// duration, duplicate job IDs and unknown priorities are errors.
func ReadTrace(r io.Reader) ([]TraceJob, error) {
	cr, err := csvhead.NewReader(r, "trace", "job_id", "submit_s", "num_gpus", "duration_s")
	if err != nil {
		return nil, err
	}
	col := cr.Col
	vc, hasVC := col["vc"]
	if !hasVC {
		vc, hasVC = col["tenant"]
	}
	prio, hasPrio := col["priority"]
	var out []TraceJob
	for line, rec := range cr.Rows() {
		j := TraceJob{ID: rec[col["job_id"]], Tenant: "default", Priority: jobs.Guaranteed}
		if j.ID == "" {
			return nil, fmt.Errorf("read trace line %d: empty job_id", line)
		}
		if err := cr.Unique("job_id", j.ID, line); err != nil {
			return nil, err
		}
		if hasVC && rec[vc] != "" {
			j.Tenant = rec[vc]
		}
		if hasPrio {
			switch p := jobs.Priority(strings.TrimSpace(rec[prio])); p {
			case "", jobs.Guaranteed:
			case jobs.Opportunistic:
				j.Priority = p
			default:
				return nil, fmt.Errorf("read trace line %d: priority %q: want guaranteed or opportunistic", line, rec[prio])
			}
		}
		if j.Submit, err = strconv.ParseFloat(strings.TrimSpace(rec[col["submit_s"]]), 64); err != nil || !(j.Submit >= 0) || math.IsInf(j.Submit, 0) {
			return nil, fmt.Errorf("read trace line %d: submit_s %q: not a finite non-negative number", line, rec[col["submit_s"]])
		}
		if j.GPUs, err = strconv.Atoi(strings.TrimSpace(rec[col["num_gpus"]])); err != nil || j.GPUs < 1 {
			return nil, fmt.Errorf("read trace line %d: num_gpus %q: not a positive integer", line, rec[col["num_gpus"]])
		}
		if j.Duration, err = strconv.ParseFloat(strings.TrimSpace(rec[col["duration_s"]]), 64); err != nil || !(j.Duration > 0) || math.IsInf(j.Duration, 0) {
			return nil, fmt.Errorf("read trace line %d: duration_s %q: not a finite positive number", line, rec[col["duration_s"]])
		}
		out = append(out, j)
	}
	return csvhead.SortedJobs(cr, out, func(j TraceJob) (float64, string) { return j.Submit, j.ID })
}
