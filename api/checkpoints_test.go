package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
)

// fakeCheckpoints holds one job's checkpoints in memory.
type fakeCheckpoints struct {
	job   string
	list  []api.Checkpoint
	model map[int64]string
}

func (f fakeCheckpoints) ListCheckpoints(ctx context.Context, jobID string) ([]api.Checkpoint, error) {
	if jobID != f.job {
		return nil, nil
	}
	return f.list, nil
}

func (f fakeCheckpoints) OpenModel(ctx context.Context, jobID string, step int64) (io.ReadCloser, api.CheckpointShard, error) {
	body, ok := f.model[step]
	if jobID != f.job || !ok {
		return nil, api.CheckpointShard{}, fmt.Errorf("step %d: %w", step, jobs.ErrNotFound)
	}
	return io.NopCloser(strings.NewReader(body)), api.CheckpointShard{Name: "params", Size: int64(len(body)), SHA256: "abc123"}, nil
}

func TestCheckpointRoutes(t *testing.T) {
	r := testenv.NewRedis(t)

	// Submit through a server without checkpoints to learn the job ID.
	plain := newEnvWith(t, r, api.Config{})
	id := plain.submit(tokA, exampleJob(t)).job(t).ID
	fake := fakeCheckpoints{job: id, model: map[int64]string{200: "EDLM-model-bytes"},
		list: []api.Checkpoint{{Step: 200, Epoch: 1, WorldSize: 2, SizeBytes: 16, CreatedAt: time.Unix(1, 0).UTC(),
			Shards: []api.CheckpointShard{{Name: "params", Size: 16, SHA256: "abc123"}}}}}
	e := newEnvWith(t, r, api.Config{Checkpoints: fake})

	var list api.CheckpointList
	got := e.get("/v1/jobs/"+id+"/checkpoints", tokA)
	if got.code != http.StatusOK {
		t.Fatalf("list: status %d %s", got.code, got.body)
	}
	got.json(t, &list)
	if len(list.Checkpoints) != 1 || list.Checkpoints[0].Step != 200 || list.Checkpoints[0].Shards[0].SHA256 != "abc123" {
		t.Fatalf("list = %+v", list)
	}
	m := e.get("/v1/jobs/"+id+"/checkpoints/200/model", tokA)
	if m.code != http.StatusOK || string(m.body) != "EDLM-model-bytes" {
		t.Fatalf("model: status %d body %q", m.code, m.body)
	}
	if m.header.Get("X-Checkpoint-SHA256") != "abc123" || m.header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("model headers = %v", m.header)
	}
	// The job is there, the checkpoint is not: the answer says which.
	if p := e.get("/v1/jobs/"+id+"/checkpoints/999/model", tokA).problem(t, http.StatusNotFound, api.ProblemNotFound); p.Title != "no such checkpoint" {
		t.Errorf("missing step: title %q, want no such checkpoint", p.Title)
	}
	e.get("/v1/jobs/"+id+"/checkpoints/x/model", tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
	// Another tenant learns nothing.
	e.get("/v1/jobs/"+id+"/checkpoints", tokB).problem(t, http.StatusNotFound, api.ProblemNotFound)
	if p := e.get("/v1/jobs/"+id+"/checkpoints/200/model", tokB).problem(t, http.StatusNotFound, api.ProblemNotFound); p.Title != "no such job" {
		t.Errorf("another tenant's checkpoint: title %q, want no such job", p.Title)
	}
	// Without a store the routes say so.
	plain.get("/v1/jobs/"+id+"/checkpoints", tokA).problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
}
