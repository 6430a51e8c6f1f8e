package api_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/jobs/jobstore"
)

func TestProgressRoute(t *testing.T) {
	r := testenv.NewRedis(t)
	e := newEnvWith(t, r, api.Config{})
	// A store with no thinning, over the same keys as the server's.
	fast := jobstore.New(r.Client, jobstore.Config{Prefix: r.Prefix, ProgressEvery: time.Nanosecond})
	ctx := context.Background()
	j := e.submit(tokA, exampleJob(t)).job(t)
	for i := int64(1); i <= 5; i++ {
		if err := fast.SetProgress(ctx, j.ID, jobs.Progress{Step: i * 10, Loss: 1 / float64(i), SamplesPerS: 100, WorldSize: 1}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	var page api.ProgressHistory
	e.get("/v1/jobs/"+j.ID+"/progress", tokA).json(t, &page)
	if len(page.Points) != 5 || page.Points[0].Step != 10 || page.Points[4].Step != 50 || page.Next != page.Points[4].ID {
		t.Fatalf("history %+v", page)
	}
	if page.Points[2].Loss != 1.0/3 {
		t.Errorf("loss of the third point %v", page.Points[2].Loss)
	}
	var rest api.ProgressHistory
	e.get("/v1/jobs/"+j.ID+"/progress?since="+page.Points[2].ID, tokA).json(t, &rest)
	if len(rest.Points) != 2 || rest.Points[0].Step != 40 {
		t.Fatalf("since the third point: %+v", rest)
	}
	var two api.ProgressHistory
	e.get("/v1/jobs/"+j.ID+"/progress?limit=2", tokA).json(t, &two)
	if len(two.Points) != 2 || two.Next != two.Points[1].ID {
		t.Fatalf("limit 2: %+v", two)
	}
	// since as a time: only the points after it
	var after api.ProgressHistory
	e.get("/v1/jobs/"+j.ID+"/progress?since="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), tokA).json(t, &after)
	if len(after.Points) != 0 || after.Next == "" {
		t.Fatalf("since an hour from now: %+v", after)
	}
	var all api.ProgressHistory
	e.get("/v1/jobs/"+j.ID+"/progress?since="+url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339)), tokA).json(t, &all)
	if len(all.Points) != 5 {
		t.Fatalf("since an hour ago: %d points", len(all.Points))
	}

	tests := []struct {
		name, path, token string
		status            int
		typ               string
	}{
		{"another tenant's job", "/v1/jobs/" + j.ID + "/progress", tokB, http.StatusNotFound, api.ProblemNotFound},
		{"no such job", "/v1/jobs/j-nope/progress", tokA, http.StatusNotFound, api.ProblemNotFound},
		{"no token", "/v1/jobs/" + j.ID + "/progress", "", http.StatusUnauthorized, api.ProblemUnauthorized},
		{"bad since", "/v1/jobs/" + j.ID + "/progress?since=yesterday", tokA, http.StatusBadRequest, api.ProblemValidation},
		{"limit 0", "/v1/jobs/" + j.ID + "/progress?limit=0", tokA, http.StatusBadRequest, api.ProblemValidation},
		{"limit too big", "/v1/jobs/" + j.ID + "/progress?limit=5001", tokA, http.StatusBadRequest, api.ProblemValidation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.get(tc.path, tc.token).problem(t, tc.status, tc.typ)
		})
	}
}
