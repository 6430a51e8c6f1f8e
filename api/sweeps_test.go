package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/internal/testenv"
	"github.com/edl-nomad/edl/jobs/sweep"
	"github.com/edl-nomad/edl/jobs/sweepstore"
)

func exampleSweep(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newSweepEnv(t *testing.T) *env {
	r := testenv.NewRedis(t)
	return newEnvWith(t, r, api.Config{Sweeps: sweepstore.New(r.Client, sweepstore.Config{Prefix: r.Prefix})})
}

func (e *env) submitSweep(token, body string, header map[string]string) reply {
	e.t.Helper()
	return e.do(req{method: http.MethodPost, path: "/v1/sweeps", token: token, ctype: "application/json", body: body, header: header})
}

func TestSweepsSubmitGetListCancel(t *testing.T) {
	e := newSweepEnv(t)
	body := exampleSweep(t)
	r := e.submitSweep(tokA, body, map[string]string{"Idempotency-Key": "k"})
	if r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	var sw sweep.Sweep
	r.json(t, &sw)
	if sw.State != sweep.Running || len(sw.Trials) != 16 || sw.Trials[0].Params["trainer.builtin.lr"] == nil || r.header.Get("Location") != "/v1/sweeps/"+sw.ID {
		t.Fatalf("sweep: %+v location %q", sw, r.header.Get("Location"))
	}
	if again := e.submitSweep(tokA, body, map[string]string{"Idempotency-Key": "k"}); again.code != http.StatusOK {
		t.Fatalf("replay: %d", again.code)
	}
	e.submitSweep(tokA, strings.Replace(body, `"seed": 1`, `"seed": 2`, 1), map[string]string{"Idempotency-Key": "k"}).
		problem(t, http.StatusUnprocessableEntity, api.ProblemIdempotencyMismatch)

	got := e.get("/v1/sweeps/"+sw.ID, tokA)
	var g sweep.Sweep
	got.json(t, &g)
	if got.code != http.StatusOK || g.ID != sw.ID || len(g.Trials) != 16 {
		t.Fatalf("get: %d %s", got.code, got.body)
	}
	e.get("/v1/sweeps/"+sw.ID, tokB).problem(t, http.StatusNotFound, api.ProblemNotFound)

	var list api.SweepList
	e.get("/v1/sweeps", tokA).json(t, &list)
	if len(list.Sweeps) != 1 || list.Sweeps[0].ID != sw.ID {
		t.Fatalf("list: %+v", list)
	}
	e.get("/v1/sweeps", tokB).json(t, &list)
	if len(list.Sweeps) != 0 {
		t.Fatalf("another tenant's list: %+v", list)
	}
	// The page cursor comes back as next or cursor, as for jobs; a made-up
	// one is 400 naming the parameter it came as (cursor was ignored).
	for _, q := range []string{"next=zzz", "cursor=zzz", "next=a&cursor=b"} {
		p := e.get("/v1/sweeps?"+q, tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
		if want := strings.SplitN(q, "=", 2)[0]; len(p.Errors) != 1 || p.Errors[0].Field != want {
			t.Errorf("%s: %+v, want %s at fault", q, p.Errors, want)
		}
	}

	del := e.do(req{method: http.MethodDelete, path: "/v1/sweeps/" + sw.ID, token: tokA})
	var d sweep.Sweep
	del.json(t, &d)
	if del.code != http.StatusAccepted || d.State != sweep.Cancelling {
		t.Fatalf("cancel: %d %s", del.code, del.body)
	}
	if again := e.do(req{method: http.MethodDelete, path: "/v1/sweeps/" + sw.ID, token: tokA}); again.code != http.StatusAccepted {
		t.Fatalf("cancel twice: %d", again.code)
	}
	var page api.SweepEventPage
	e.get("/v1/sweeps/"+sw.ID+"/events", tokA).json(t, &page)
	if len(page.Events) != 2 || page.Events[0].Type != sweep.EventSubmitted || page.Events[1].Type != sweep.EventState {
		t.Fatalf("events: %+v", page.Events)
	}
}

func TestSweepSubmitNamesTheField(t *testing.T) {
	e := newSweepEnv(t)
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(exampleSweep(t)), &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name, body, field string
	}{
		{"unknown field", edit(func(m map[string]any) { m["trials"] = 3 }), "trials"},
		{"no trials", edit(func(m map[string]any) { m["num_trials"] = 0 }), "num_trials"},
		{"mode", edit(func(m map[string]any) { m["metric"] = map[string]any{"name": "loss", "mode": "up"} }), "metric.mode"},
		{"path to nowhere", edit(func(m map[string]any) {
			m["parameters"] = map[string]any{"trainer.builtin.nope": map[string]any{"type": "uniform", "min": 0, "max": 1}}
		}), "parameters[trainer.builtin.nope]"},
		{"a trial over the tenant's limits", edit(func(m map[string]any) {
			m["parameters"] = map[string]any{"workers.max": map[string]any{"type": "choice", "values": []any{2, 2000}}}
		}), "parameters[workers.max].values[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := e.submitSweep(tokA, c.body, nil).problem(t, http.StatusUnprocessableEntity, api.ProblemValidation)
			if len(p.Errors) == 0 || p.Errors[0].Field != c.field {
				t.Fatalf("want field %s, got %+v", c.field, p.Errors)
			}
		})
	}
	noStore := newEnv(t)
	noStore.submitSweep(tokA, exampleSweep(t), nil).problem(t, http.StatusServiceUnavailable, api.ProblemUnavailable)
}

// conformanceSweeps stores a running sweep and a cancelled one of team-a.
func conformanceSweeps(t *testing.T, s *sweepstore.Store, body string) (running, cancelled string) {
	t.Helper()
	var spec sweep.Spec
	if err := json.Unmarshal([]byte(body), &spec); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _, err := s.Create(ctx, "team-a", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.Create(ctx, "team-a", spec, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, b.ID, func(sw *sweep.Sweep) ([]sweep.Event, error) {
		sw.State = sweep.Cancelled
		return []sweep.Event{{Type: sweep.EventState, Message: "running -> cancelled", Data: map[string]any{"from": "running", "to": "cancelled"}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return a.ID, b.ID
}
