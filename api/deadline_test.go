package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edl-nomad/edl/api"
)

// deadlineSpec is a built-in job of 2,000 samples (1,000 x 2 epochs) on
// GPU workers of a stated speed, with no workers range: the planner picks.
func deadlineSpec(deadline string) string {
	return `{"name":"d","gpus_per_worker":1,"per_worker_speed":10,` + deadline + `,
	"trainer":{"kind":"builtin","builtin":{"model":{"hidden":[16]},"dataset":{"seed":1,"samples":1000,"features":8,"classes":3,"partitions":8},"epochs":2,"batch_size":32,"learning_rate":0.1,"momentum":0.9}}}`
}

func TestDeadlineAdmission(t *testing.T) {
	e := newEnv(t) // one node of 4 GPUs
	post := func(path, body string) reply {
		return e.do(req{method: http.MethodPost, path: path, token: tokA, ctype: "application/json", body: body})
	}
	// 2,000 samples at 10/s per worker cannot be done in 10 s on 4 GPUs.
	r := post("/v1/jobs", deadlineSpec(`"within":"10s"`))
	p := r.problem(t, http.StatusUnprocessableEntity, api.ProblemDeadline)
	if p.EarliestFeasible == nil || len(p.Errors) != 1 || p.Errors[0].Field != "within" {
		t.Fatalf("problem %+v: want earliest_feasible and the field within", p)
	}
	ef := *p.EarliestFeasible
	if d := time.Until(ef); d < 50*time.Second || d > 2*time.Minute {
		t.Errorf("earliest feasible in %s, want about a minute (2,000 samples at 4 x 10/s less communication)", d)
	}
	// A dry run at that deadline is admitted, and creates nothing.
	at := fmt.Sprintf(`"deadline":%q`, ef.Add(5*time.Second).Format(time.RFC3339))
	r = post("/v1/jobs?dry_run=true", deadlineSpec(at))
	if r.code != http.StatusOK {
		t.Fatalf("dry run: %d %s", r.code, r.body)
	}
	var dr api.DryRun
	r.json(t, &dr)
	if !dr.Admitted || dr.Workers < 1 || dr.ExpectedFinish == nil || dr.ExpectedFinish.After(ef.Add(5*time.Second)) {
		t.Fatalf("dry run %+v, want admitted with a plan in time", dr)
	}
	list := e.do(req{method: http.MethodGet, path: "/v1/jobs", token: tokA})
	var jl api.JobList
	list.json(t, &jl)
	if len(jl.Jobs) != 0 {
		t.Fatalf("the dry run created %d jobs", len(jl.Jobs))
	}
	// Submitted for real it is created, with its deadline and no range given.
	r = post("/v1/jobs", deadlineSpec(at))
	if r.code != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	j := r.job(t)
	if j.Spec.Deadline == nil || j.Spec.Workers.Min != 1 || j.Spec.DeadlinePolicy != "strict" {
		t.Errorf("job spec %+v", j.Spec)
	}
	// The cluster is now planned for it: the same job again does not fit
	// by the same deadline, and a best-effort one is admitted anyway.
	post("/v1/jobs", deadlineSpec(at)).problem(t, http.StatusUnprocessableEntity, api.ProblemDeadline)
	if r := post("/v1/jobs", deadlineSpec(at+`,"deadline_policy":"best_effort"`)); r.code != http.StatusCreated {
		t.Errorf("best effort: %d %s", r.code, r.body)
	}
	if r := post("/v1/jobs?dry_run=maybe", deadlineSpec(at)); r.code != http.StatusBadRequest {
		t.Errorf("dry_run=maybe: %d", r.code)
	}
}

// A strict deadline job retried with its Idempotency-Key is the job
// already created (200), not a second copy put through admission: the
// retry was refused 422 deadline-infeasible once the first copy held the
// cluster, so a client whose first answer was lost saw its admitted job
// refused.
func TestDeadlineRetryWithIdempotencyKey(t *testing.T) {
	e := newEnv(t) // one node of 4 GPUs
	post := func(body, key string) reply {
		return e.do(req{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "application/json", body: body,
			header: map[string]string{"Idempotency-Key": key}})
	}
	// About a minute of work on the 4 GPUs, due in 80 s: one fits, two do not.
	at := fmt.Sprintf(`"deadline":%q`, time.Now().Add(80*time.Second).UTC().Format(time.RFC3339))
	first := post(deadlineSpec(at), "k1")
	if first.code != http.StatusCreated {
		t.Fatalf("first: %d %s", first.code, first.body)
	}
	again := post(deadlineSpec(at), "k1")
	if again.code != http.StatusOK {
		t.Fatalf("retry: %d %s, want 200 and the job created", again.code, again.body)
	}
	if a, b := first.job(t), again.job(t); a.ID != b.ID {
		t.Errorf("retry answered job %s, created %s", b.ID, a.ID)
	}
	// Another key is another job, and it does not fit.
	post(deadlineSpec(at), "k2").problem(t, http.StatusUnprocessableEntity, api.ProblemDeadline)
	// The same key with another body is still the 422 it was.
	if r := post(deadlineSpec(at+`,"deadline_policy":"best_effort"`), "k1"); r.code != http.StatusUnprocessableEntity {
		t.Errorf("same key, other body: %d %s", r.code, r.body)
	}
}

// Strict deadline jobs submitted at once are admitted one after another:
// each is judged with the ones admitted before it. Judged side by side,
// every one of them saw the cluster without the others and several were
// admitted where only one fits.
func TestDeadlineConcurrentSubmissions(t *testing.T) {
	e := newEnv(t) // one node of 4 GPUs
	// About a minute of work on the 4 GPUs, due in 80 s: one fits, two do not.
	at := fmt.Sprintf(`"deadline":%q`, time.Now().Add(80*time.Second).UTC().Format(time.RFC3339))
	const n = 8
	codes := make(chan int, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			codes <- e.do(req{method: http.MethodPost, path: "/v1/jobs", token: tokA, ctype: "application/json", body: deadlineSpec(at)}).code
		}()
	}
	close(start)
	created := 0
	for range n {
		switch c := <-codes; c {
		case http.StatusCreated:
			created++
		case http.StatusUnprocessableEntity:
		default:
			t.Errorf("status %d", c)
		}
	}
	if created != 1 {
		t.Errorf("%d of %d admitted, room for 1", created, n)
	}
}

// A bare ?dry_run (or dry_run=) read as absent: the client that asked for
// a dry run got a real job created (201). It is a 400 naming dry_run now,
// and creates nothing, for a job with a deadline or without.
func TestBareDryRunIsRefused(t *testing.T) {
	e := newEnv(t)
	at := fmt.Sprintf(`"deadline":%q`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	for _, body := range []string{deadlineSpec(at), exampleJob(t)} {
		for _, q := range []string{"?dry_run", "?dry_run=", "?dry_run&x=1"} {
			r := e.do(req{method: http.MethodPost, path: "/v1/jobs" + q, token: tokA, ctype: "application/json", body: body})
			p := r.problem(t, http.StatusBadRequest, api.ProblemValidation)
			if len(p.Errors) != 1 || p.Errors[0].Field != "dry_run" {
				t.Errorf("%s: errors %+v, want dry_run named", q, p.Errors)
			}
		}
	}
	var jl api.JobList
	e.do(req{method: http.MethodGet, path: "/v1/jobs", token: tokA}).json(t, &jl)
	if len(jl.Jobs) != 0 {
		t.Fatalf("a bare dry_run created %d jobs", len(jl.Jobs))
	}
}
