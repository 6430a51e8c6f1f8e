package jobstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/internal/records"
)

// gpuStatsTTL drops a job's GPU reports once no worker has written for
// this long (the job ended, or its workers have no NVML any more).
const gpuStatsTTL = 2 * time.Minute

func (s *Store) gpuStatsKey(id string) string { return s.cfg.Prefix + "{" + id + "}:gpus" }

// SetWorkerGPUStats records a worker's GPU report (one hash field per
// worker, the key expiring when reports stop).
func (s *Store) SetWorkerGPUStats(ctx context.Context, jobID string, st jobs.WorkerGPUStats) error {
	if !records.ValidID(jobID) {
		return jobs.ErrNotFound
	}
	if st.Time.IsZero() {
		st.Time = s.cfg.Now().UTC()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode gpu stats: %w", err)
	}
	key := s.gpuStatsKey(jobID)
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, key, st.Worker, b)
	pipe.PExpire(ctx, key, gpuStatsTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("gpu stats of %s: %w", jobID, err)
	}
	return nil
}

// WorkerGPUStats returns the reports of the job's workers newer than
// maxAge, by worker ID.
func (s *Store) WorkerGPUStats(ctx context.Context, jobID string, now time.Time, maxAge time.Duration) ([]jobs.WorkerGPUStats, error) {
	if !records.ValidID(jobID) {
		return nil, jobs.ErrNotFound
	}
	vals, err := s.rdb.HGetAll(ctx, s.gpuStatsKey(jobID)).Result()
	if err != nil {
		return nil, fmt.Errorf("gpu stats of %s: %w", jobID, err)
	}
	out := make([]jobs.WorkerGPUStats, 0, len(vals))
	for worker, raw := range vals {
		var st jobs.WorkerGPUStats
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return nil, fmt.Errorf("gpu stats of %s worker %s: %w", jobID, worker, err)
		}
		if now.Sub(st.Time) > maxAge {
			continue
		}
		st.Worker = worker
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out, nil
}
