package nomadtest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// free-form maps whose keys depend on the agent, not on Nomad's schema.
var nodeSkip = []string{".Attributes", ".Drivers", ".Meta", ".Events", ".Links", ".CSIControllerPlugins", ".CSINodePlugins",
	".NodeResources.Networks", ".NodeResources.NodeNetworks", "[].Drivers", "[].NodeResources.Networks", "[].NodeResources.NodeNetworks"}

// TestReplayRecordedSequence replays the recorded session (testdata/README.md,
// "Sequence") and compares shapes, states, status codes and error texts.
func TestReplayRecordedSequence(t *testing.T) {
	s := New(t, Config{Sync: true})
	u := s.URL()

	// Nodes.
	r := do(t, "GET", u+"/v1/nodes?resources=true", nil)
	nodes := decode(t, r.body)
	sameShape(t, "nodes-list-resources", nodes, fixture(t, "nodes-list-resources.json"), nodeSkip...)
	nodeID := nodes.([]any)[0].(map[string]any)["ID"].(string)
	r = do(t, "GET", u+"/v1/node/"+nodeID, nil)
	sameShape(t, "node", decode(t, r.body), fixture(t, "node.json"), append(nodeSkip,
		".Reserved", ".Resources", ".HostNetworks", ".HostVolumes", ".ComputedClass", ".CgroupParent", ".LastAllocUpdateIndex", ".LastMissedHeartbeatIndex",
		".DrainStrategy", ".LastDrain", ".NodeClass", ".StatusDescription", ".StatusUpdatedAt", ".TLSEnabled", ".IdentitySigningKeyID", ".NodeMaxAllocs")...)

	// Register count 2.
	r = do(t, "PUT", u+"/v1/jobs", readFixture(t, "job-register.request.json"))
	if r.status != 200 || r.index == "" {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	sameShape(t, "job-register.response", decode(t, r.body), fixture(t, "job-register.response.json"))
	r = do(t, "GET", u+"/v1/job/train-fx", nil)
	sameShape(t, "job", decode(t, r.body), fixture(t, "job.json"))
	wantJobValues(t, decode(t, r.body).(map[string]any))

	r = do(t, "GET", u+"/v1/job/train-fx/allocations", nil)
	allocs := decode(t, r.body)
	sameShape(t, "job-allocations", allocs, fixture(t, "job-allocations.json"))
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations.json")), allocSummary(allocs)); d != "" {
		t.Errorf("allocations after register (-recorded +got):\n%s", d)
	}
	first := allocs.([]any)[0].(map[string]any)["ID"].(string)
	r = do(t, "GET", u+"/v1/allocation/"+first, nil)
	alloc := decode(t, r.body)
	sameShape(t, "allocation", alloc, fixture(t, "allocation.json"), ".Metrics.ScoreMetaData", ".Job.TaskGroups[].Tasks[].Config", ".SigningKeyID")

	r = do(t, "GET", u+"/v1/job/train-fx/evaluations", nil)
	sameShape(t, "job-evaluations", decode(t, r.body), fixture(t, "job-evaluations.json"))
	for _, f := range []struct{ path, file string }{{"/deployments", "job-deployments.json"}, {"/deployment", "job-deployment-latest.json"}} {
		r = do(t, "GET", u+"/v1/job/train-fx"+f.path, nil)
		if d := cmp.Diff(fixture(t, f.file), decode(t, r.body)); d != "" {
			t.Errorf("%s (-recorded +got):\n%s", f.path, d)
		}
	}

	// Scale up to 3, then down to 2: workers[2] is stopped.
	r = do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-up.request.json"))
	sameShape(t, "job-scale-up.response", decode(t, r.body), fixture(t, "job-scale-up.response.json"))
	r = do(t, "GET", u+"/v1/job/train-fx/scale", nil)
	got := decode(t, r.body)
	sameShape(t, "job-scale-status", got, fixture(t, "job-scale-status.json"))
	wantGroupStatus(t, got, fixture(t, "job-scale-status.json"))
	r = do(t, "GET", u+"/v1/job/train-fx/summary", nil)
	wantSummary(t, decode(t, r.body), fixture(t, "job-summary.json"))

	r = do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-down.request.json"))
	sameShape(t, "job-scale-down.response", decode(t, r.body), fixture(t, "job-scale-down.response.json"))
	r = do(t, "GET", u+"/v1/job/train-fx/allocations", nil)
	allocs = decode(t, r.body)
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations-after-scale-in.json")), allocSummary(allocs)); d != "" {
		t.Errorf("allocations after scale-in (-recorded +got):\n%s", d)
	}

	// Stop workers[1]: a replacement under the same name.
	var w1 string
	for _, a := range allocs.([]any) {
		m := a.(map[string]any)
		if m["Name"] == "train-fx.workers[1]" && m["DesiredStatus"] == "run" {
			w1 = m["ID"].(string)
		}
	}
	r = do(t, "POST", u+"/v1/allocation/"+w1+"/stop", nil)
	sameShape(t, "allocation-stop", decode(t, r.body), fixture(t, "allocation-stop.json"))
	r = do(t, "GET", u+"/v1/allocation/"+w1, nil)
	stopped := decode(t, r.body).(map[string]any)
	sameShape(t, "allocation-stopped", stopped, fixture(t, "allocation-stopped.json"), ".Metrics.ScoreMetaData", ".Job.TaskGroups[].Tasks[].Config", ".SigningKeyID")
	rec := fixture(t, "allocation-stopped.json").(map[string]any)
	for _, k := range []string{"DesiredStatus", "DesiredDescription", "ClientStatus", "ClientDescription", "DesiredTransition"} {
		if d := cmp.Diff(rec[k], stopped[k]); d != "" {
			t.Errorf("stopped allocation %s (-recorded +got):\n%s", k, d)
		}
	}
	r = do(t, "GET", u+"/v1/job/train-fx/allocations", nil)
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations-after-stop.json")), allocSummary(decode(t, r.body))); d != "" {
		t.Errorf("allocations after stop (-recorded +got):\n%s", d)
	}

	// Scale to 5 with 4 GPUs: one allocation queued under a blocked eval.
	r = do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-over-capacity.request.json"))
	if r.status != 200 {
		t.Fatalf("scale over capacity: %d %s", r.status, r.body)
	}
	r = do(t, "GET", u+"/v1/job/train-fx/summary", nil)
	wantSummary(t, decode(t, r.body), fixture(t, "job-summary-queued.json"))
	r = do(t, "GET", u+"/v1/job/train-fx/scale", nil)
	wantGroupStatus(t, decode(t, r.body), fixture(t, "job-scale-status-queued.json"))
	r = do(t, "GET", u+"/v1/job/train-fx/evaluations", nil)
	evals := decode(t, r.body)
	sameShape(t, "job-evaluations-blocked", evals, fixture(t, "job-evaluations-blocked.json"), "[].ClassEligibility")
	wantBlockedEval(t, evals)
	r = do(t, "GET", u+"/v1/job/train-fx/allocations", nil)
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations-over-capacity.json")), allocSummary(decode(t, r.body))); d != "" {
		t.Errorf("allocations over capacity (-recorded +got):\n%s", d)
	}

	// A blocking query with no change returns after wait, same index.
	idx := r.index
	start := time.Now()
	r2 := do(t, "GET", u+"/v1/job/train-fx/allocations?index="+idx+"&wait=300ms", nil)
	if r2.index != idx || time.Since(start) < 250*time.Millisecond {
		t.Errorf("blocking query without change: index %s (want %s) after %v", r2.index, idx, time.Since(start))
	}

	checkErrors(t, u)

	// Purge.
	r = do(t, "DELETE", u+"/v1/job/no-such-job?purge=true", nil)
	if d := cmp.Diff(fixture(t, "job-deregister-purge-unknown-job.json"), decode(t, r.body)); d != "" || r.index != "0" {
		t.Errorf("purge unknown job (index %s) (-recorded +got):\n%s", r.index, d)
	}
	r = do(t, "DELETE", u+"/v1/job/train-fx?purge=true", nil)
	sameShape(t, "job-deregister-purge", decode(t, r.body), fixture(t, "job-deregister-purge.json"))
	r = do(t, "GET", u+"/v1/job/train-fx", nil)
	wantError(t, "job after purge", r, errorFixture(t, "error-job-after-purge.json"))
	r = do(t, "GET", u+"/v1/job/train-fx/allocations", nil)
	if d := cmp.Diff(allocSummary(fixture(t, "job-allocations-after-purge.json")), allocSummary(decode(t, r.body))); d != "" {
		t.Errorf("allocations after purge (-recorded +got):\n%s", d)
	}
}

func wantJobValues(t *testing.T, got map[string]any) {
	t.Helper()
	rec := fixture(t, "job.json").(map[string]any)
	// Everything but indexes and times must match the recording.
	for _, k := range []string{"CreateIndex", "ModifyIndex", "JobModifyIndex", "SubmitTime"} {
		delete(rec, k)
		delete(got, k)
	}
	if d := cmp.Diff(rec, got); d != "" {
		t.Errorf("stored job (-recorded +got):\n%s", d)
	}
}

func wantGroupStatus(t *testing.T, got, rec any) {
	t.Helper()
	pick := func(v any) map[string]any {
		g := v.(map[string]any)["TaskGroups"].(map[string]any)["workers"].(map[string]any)
		out := map[string]any{}
		for _, k := range []string{"Desired", "Placed", "Running", "Healthy", "Unhealthy"} {
			out[k] = g[k]
		}
		var msgs []any
		for _, e := range g["Events"].([]any) {
			m := e.(map[string]any)
			msgs = append(msgs, []any{m["Message"], m["Count"], m["PreviousCount"], m["Error"]})
		}
		out["Events"] = msgs
		return out
	}
	if d := cmp.Diff(pick(rec), pick(got)); d != "" {
		t.Errorf("scale status (-recorded +got):\n%s", d)
	}
}

func wantSummary(t *testing.T, got, rec any) {
	t.Helper()
	sameShape(t, "summary", got, rec)
	pick := func(v any) any { return v.(map[string]any)["Summary"] }
	if d := cmp.Diff(pick(rec), pick(got)); d != "" {
		t.Errorf("summary (-recorded +got):\n%s", d)
	}
}

func wantBlockedEval(t *testing.T, evals any) {
	t.Helper()
	var blocked, scaling map[string]any
	for _, e := range evals.([]any) {
		m := e.(map[string]any)
		if m["Status"] == "blocked" {
			blocked = m
		}
		if m["BlockedEval"] != nil {
			scaling = m
		}
	}
	if blocked == nil || scaling == nil || scaling["BlockedEval"] != blocked["ID"] || blocked["TriggeredBy"] != "queued-allocs" {
		t.Fatalf("no blocked eval linked from the scaling eval: %v", evals)
	}
	dim := scaling["FailedTGAllocs"].(map[string]any)["workers"].(map[string]any)["DimensionExhausted"]
	if d := cmp.Diff(map[string]any{"devices: no devices match request": json.Number("1")}, dim); d != "" {
		t.Errorf("DimensionExhausted (-recorded +got):\n%s", d)
	}
	if q := scaling["QueuedAllocations"].(map[string]any)["workers"]; q != json.Number("1") {
		t.Errorf("QueuedAllocations = %v, want 1", q)
	}
}

func wantError(t *testing.T, what string, r rawResp, e envelope) {
	t.Helper()
	if r.status != e.StatusCode || r.ctype != e.ContentType || string(r.body) != e.Body {
		t.Errorf("%s: got %d %q %q, recorded %d %q %q", what, r.status, r.ctype, r.body, e.StatusCode, e.ContentType, e.Body)
	}
}

// checkErrors replays the recorded error answers.
func checkErrors(t *testing.T, u string) {
	t.Helper()
	zero := "00000000-0000-0000-0000-000000000000"
	for _, c := range []struct{ method, path, req, file string }{
		{"GET", "/v1/job/no-such-job", "", "error-job-not-found.json"},
		{"GET", "/v1/job/no-such-job/summary", "", "error-job-summary-not-found.json"},
		{"GET", "/v1/job/no-such-job/scale", "", "error-job-scale-status-not-found.json"},
		{"POST", "/v1/job/no-such-job/scale", "error-scale-unknown-job.request.json", "error-scale-unknown-job.response.json"},
		{"POST", "/v1/job/train-fx/scale", "error-scale-negative-count.request.json", "error-scale-negative-count.response.json"},
		{"POST", "/v1/job/train-fx/scale", "error-scale-unknown-group.request.json", "error-scale-unknown-group.response.json"},
		{"POST", "/v1/job/train-fx/scale", "error-scale-missing-group.request.json", "error-scale-missing-group.response.json"},
		{"GET", "/v1/allocation/" + zero, "", "error-allocation-not-found.json"},
		{"POST", "/v1/allocation/" + zero + "/stop", "", "error-allocation-stop-not-found.json"},
		{"GET", "/v1/node/" + zero, "", "error-node-not-found.json"},
		{"PUT", "/v1/jobs", "error-job-register-batch-update.request.json", "error-job-register-batch-update.response.json"},
	} {
		var body []byte
		if c.req != "" {
			body = readFixture(t, c.req)
		}
		r := do(t, c.method, u+c.path, body)
		wantError(t, c.method+" "+c.path, r, errorFixture(t, c.file))
		wantIndexHeader(t, c.method+" "+c.path, r.index, recordedIndex(t, c.file))
	}
	r := do(t, "GET", u+"/v1/job/no-such-job/allocations", nil)
	if r.status != 200 || string(r.body) != "[]" {
		t.Errorf("allocations of unknown job: %d %s, recorded 200 []", r.status, r.body)
	}
}

// recordedIndex is the X-Nomad-Index the agent sent with file's answer, ""
// where it sent none.
func recordedIndex(t *testing.T, file string) string {
	t.Helper()
	var entries []struct {
		File    string            `json:"file"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(readFixture(t, "index.json"), &entries); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	for _, e := range entries {
		if e.File == file {
			return e.Headers["X-Nomad-Index"]
		}
	}
	t.Fatalf("index.json lists no %s", file)
	return ""
}

// wantIndexHeader checks an error answer's X-Nomad-Index against the
// recorded one: absent where it was absent, 0 where it was 0, else an index.
func wantIndexHeader(t *testing.T, what, got, recorded string) {
	t.Helper()
	if (got == "") != (recorded == "") || (got == "0") != (recorded == "0") {
		t.Errorf("%s: X-Nomad-Index %q, recorded %q", what, got, recorded)
	}
}
