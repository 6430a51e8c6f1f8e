package api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/edl-nomad/edl/api"
	"github.com/edl-nomad/edl/jobs"
)

func TestSubmitAndGet(t *testing.T) {
	e := newEnv(t)
	r := e.submit(tokA, exampleJob(t))
	if r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	j := r.job(t)
	if loc := r.header.Get("Location"); loc != "/v1/jobs/"+j.ID {
		t.Errorf("Location %q for job %s", loc, j.ID)
	}
	if j.Tenant != "team-a" || j.State != jobs.Pending || j.Spec.Name != "mlp-synthetic" || j.CreatedAt.IsZero() {
		t.Errorf("created job: %+v", j)
	}
	g := e.get("/v1/jobs/"+j.ID, tokA)
	if g.code != http.StatusOK || g.job(t).ID != j.ID {
		t.Fatalf("get: %d %s", g.code, g.body)
	}
	for _, field := range []string{`"id"`, `"tenant"`, `"state"`, `"spec"`, `"workers"`, `"progress"`, `"created_at"`, `"updated_at"`} {
		if !strings.Contains(string(g.body), field) {
			t.Errorf("job resource lacks %s: %s", field, g.body)
		}
	}
	e.get("/v1/jobs/j-nope", tokA).problem(t, http.StatusNotFound, api.ProblemNotFound)
}

func TestSubmitErrors(t *testing.T) {
	e := newEnv(t)
	big := `{"name":"a","labels":{"x":"` + strings.Repeat("y", 1<<20) + `"}}`
	tests := []struct {
		name   string
		req    req
		status int
		typ    string
		fields []string
	}{
		{"no token", req{token: "", ctype: "application/json", body: exampleJob(t)}, 401, api.ProblemUnauthorized, nil},
		{"unknown token", req{token: "nope", ctype: "application/json", body: exampleJob(t)}, 401, api.ProblemUnauthorized, nil},
		{"basic auth", req{header: map[string]string{"Authorization": "Basic eDp5"}, ctype: "application/json", body: exampleJob(t)}, 401, api.ProblemUnauthorized, nil},
		{"text/plain", req{token: tokA, ctype: "text/plain", body: exampleJob(t)}, 415, api.ProblemUnsupportedMedia, nil},
		{"no content type", req{token: tokA, body: exampleJob(t)}, 415, api.ProblemUnsupportedMedia, nil},
		{"malformed", req{token: tokA, ctype: "application/json", body: `{"name":`}, 400, api.ProblemMalformedJSON, nil},
		{"too large", req{token: tokA, ctype: "application/json", body: big}, 413, api.ProblemTooLarge, nil},
		{"unknown field", req{token: tokA, ctype: "application/json", body: specWith(t, map[string]any{"color": "red"})}, 422, api.ProblemValidation, []string{"color"}},
		{"invalid fields", req{token: tokA, ctype: "application/json; charset=utf-8", body: specWith(t, map[string]any{
			"workers": map[string]int{"min": 3, "max": 2}, "gpus_per_worker": 99, "callback_url": "ftp://x"})},
			422, api.ProblemValidation, []string{"workers.max", "gpus_per_worker", "callback_url"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.method, tc.req.path = http.MethodPost, "/v1/jobs"
			p := e.do(tc.req).problem(t, tc.status, tc.typ)
			var got []string
			for _, f := range p.Errors {
				got = append(got, f.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.fields) && tc.fields != nil {
				t.Errorf("fields %v, want %v", got, tc.fields)
			}
		})
	}
	r := e.do(req{method: http.MethodPost, path: "/v1/jobs", ctype: "application/json", body: "{}"})
	if r.header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	e.get("/v2/nothing", tokA).problem(t, http.StatusNotFound, api.ProblemNotFound)
	e.do(req{method: http.MethodPut, path: "/v1/jobs", token: tokA}).problem(t, http.StatusMethodNotAllowed, api.ProblemMethodNotAllowed)
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	post := func(body, key string) reply {
		return e.do(req{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "application/json", body: body,
			header: map[string]string{"Idempotency-Key": key}})
	}
	first := post(exampleJob(t), "k1")
	again := post(exampleJob(t), "k1")
	if first.code != 201 || again.code != 200 || first.job(t).ID != again.job(t).ID {
		t.Fatalf("replay: %d %d %s %s", first.code, again.code, first.body, again.body)
	}
	if again.header.Get("Location") == "" {
		t.Error("replay without Location")
	}
	post(specWith(t, map[string]any{"name": "other"}), "k1").problem(t, 422, api.ProblemIdempotencyMismatch)
	if other := post(exampleJob(t), "k2"); other.code != 201 || other.job(t).ID == first.job(t).ID {
		t.Errorf("new key made no new job: %d", other.code)
	}
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	path := "/v1/jobs/" + j.ID
	for _, r := range []req{
		{method: http.MethodGet, path: path},
		{method: http.MethodGet, path: path + "/events"},
		{method: http.MethodPatch, path: path, ctype: "application/merge-patch+json", body: `{"spec":{"workers":{"max":2}}}`},
		{method: http.MethodPost, path: path + "/scale", ctype: "application/json", body: `{"workers":2}`},
		{method: http.MethodDelete, path: path},
	} {
		r.token = tokB
		e.do(r).problem(t, http.StatusNotFound, api.ProblemNotFound)
	}
	var list api.JobList
	e.get("/v1/jobs", tokB).json(t, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("team-b sees %d jobs", len(list.Jobs))
	}
	if got := e.get(path, tokA).job(t); got.State != jobs.Pending || got.Version != 1 {
		t.Errorf("team-b changed team-a's job: %+v", got)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for i := 0; i < 5; i++ {
		team := "vision"
		if i%2 == 1 {
			team = "nlp"
		}
		ids = append(ids, e.submit(tokA, specWith(t, map[string]any{"name": fmt.Sprint("j", i), "labels": map[string]string{"team": team}})).job(t).ID)
	}
	var all []string
	next := ""
	for {
		var page api.JobList
		r := e.get("/v1/jobs?limit=2&cursor="+next, tokA)
		if r.code != 200 {
			t.Fatalf("%d %s", r.code, r.body)
		}
		r.json(t, &page)
		for _, j := range page.Jobs {
			all = append(all, j.ID)
		}
		if page.Next == "" {
			break
		}
		next = page.Next
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Errorf("paged %v, want %v", all, want)
	}
	var vision api.JobList
	e.get("/v1/jobs?label=team=vision&status=pending,running", tokA).json(t, &vision)
	if len(vision.Jobs) != 3 {
		t.Errorf("label filter: %d jobs", len(vision.Jobs))
	}
	var none api.JobList
	e.get("/v1/jobs?status=cancelled", tokA).json(t, &none)
	if len(none.Jobs) != 0 {
		t.Errorf("status filter: %d jobs", len(none.Jobs))
	}
	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=zzz", "status=bogus", "label=novalue"} {
		e.get("/v1/jobs?"+q, tokA).problem(t, http.StatusBadRequest, api.ProblemValidation)
	}
}

func TestPatchScaleCancel(t *testing.T) {
	e := newEnv(t)
	j := e.submit(tokA, exampleJob(t)).job(t)
	path := "/v1/jobs/" + j.ID
	patch := func(ctype, body string) reply {
		return e.do(req{method: http.MethodPatch, path: path, token: tokA, ctype: ctype, body: body})
	}
	scale := func(body string) reply {
		return e.do(req{method: http.MethodPost, path: path + "/scale", token: tokA, ctype: "application/json", body: body})
	}
	r := patch("application/merge-patch+json", `{"spec":{"workers":{"max":5},"priority":"opportunistic"}}`)
	if r.code != 200 {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	if got := r.job(t); got.Spec.Workers != (jobs.WorkerRange{Min: 1, Max: 5}) || got.Spec.Priority != jobs.Opportunistic {
		t.Errorf("patched spec %+v", got.Spec)
	}
	patch("application/merge-patch+json", `{"spec":{"name":"x"}}`).problem(t, 422, api.ProblemValidation)
	patch("application/merge-patch+json", `{"spec":{"workers":{"min":9}}}`).problem(t, 422, api.ProblemValidation)
	patch("text/plain", `{}`).problem(t, 415, api.ProblemUnsupportedMedia)

	if r := scale(`{"workers":4}`); r.code != 202 || r.job(t).Workers.Pinned != 4 {
		t.Fatalf("scale: %d %s", r.code, r.body)
	}
	scale(`{"workers":6}`).problem(t, 422, api.ProblemValidation)
	scale(`{}`).problem(t, 422, api.ProblemValidation)
	// Narrowing the range below the pin drops the pin.
	if r := patch("application/json", `{"spec":{"workers":{"max":3}}}`); r.job(t).Workers.Pinned != 0 {
		t.Errorf("pin kept outside range: %s", r.body)
	}

	del := func() reply { return e.do(req{method: http.MethodDelete, path: path, token: tokA}) }
	if r := del(); r.code != 202 || r.job(t).State != jobs.Cancelling {
		t.Fatalf("cancel: %d %s", r.code, r.body)
	}
	if r := del(); r.code != 202 || r.job(t).State != jobs.Cancelling {
		t.Fatalf("second cancel: %d %s", r.code, r.body)
	}
	patch("application/json", `{"spec":{"workers":{"max":2}}}`).problem(t, 409, api.ProblemJobFinished)
	if _, err := e.store.Transition(t.Context(), j.ID, jobs.Cancelled, "workers gone"); err != nil {
		t.Fatal(err)
	}
	del().problem(t, 409, api.ProblemJobFinished)
	scale(`{"workers":2}`).problem(t, 409, api.ProblemJobFinished)

	var page api.EventPage
	e.get(path+"/events", tokA).json(t, &page)
	var kinds []string
	for _, ev := range page.Events {
		kinds = append(kinds, string(ev.Type))
	}
	if want := "[state scale scale scale state state]"; fmt.Sprint(kinds) != want {
		t.Errorf("event types %v, want %s", kinds, want)
	}
}

// A body without Content-Length (chunked) is cut off at the limit too.
func TestChunkedBodyOverLimit(t *testing.T) {
	e := newEnv(t)
	body := io.MultiReader(strings.NewReader(`{"name":"`), strings.NewReader(strings.Repeat("a", 1<<20+10)), strings.NewReader(`"}`))
	hr, _ := http.NewRequest(http.MethodPost, e.url+"/v1/jobs", body)
	hr.Header.Set("Authorization", "Bearer "+tokA)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if hr.ContentLength != 0 {
		t.Fatalf("request has Content-Length %d; want none (chunked)", hr.ContentLength)
	}
	reply{code: resp.StatusCode, header: resp.Header, body: b}.problem(t, http.StatusRequestEntityTooLarge, api.ProblemTooLarge)
}
