package nomadtest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// kindOf is a JSON value's type, empty arrays and objects apart.
func kindOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return "array"
	case map[string]any:
		if len(x) == 0 {
			return "{}"
		}
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// kinds collects the types seen at each key path of v.
func kinds(v any, prefix string, out map[string]map[string]bool) {
	if out[prefix] == nil {
		out[prefix] = map[string]bool{}
	}
	out[prefix][kindOf(v)] = true
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			kinds(e, prefix+"."+k, out)
		}
	case []any:
		for _, e := range x {
			kinds(e, prefix+"[]", out)
		}
	}
}

// typeDiff lists the key paths whose types differ between got and want.
func typeDiff(what string, got, want any) []string {
	g, w := map[string]map[string]bool{}, map[string]map[string]bool{}
	kinds(got, "", g)
	kinds(want, "", w)
	var out []string
	for p, wk := range w {
		gk, ok := g[p]
		if !ok {
			continue
		}
		a, b := setStr(wk), setStr(gk)
		if a != b {
			out = append(out, fmt.Sprintf("%s %s: recorded %s got %s", what, p, a, b))
		}
	}
	sort.Strings(out)
	return out
}

func setStr(m map[string]bool) string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return strings.Join(s, "|")
}

// agentTypes are values that depend on the recording agent, not on
// Nomad's schema: its drivers, host networks and scoring.
var agentTypes = []string{".Drivers.", "NodeResources.Networks", ".Resources.Networks", ".Metrics.ScoreMetaData"}

// TestJSONTypesMatchRecording replays the recorded sequence and compares
// the JSON type of every value with the recording's at the same key path
// (null, empty or not: an object, array, string, number or bool), beyond
// the key sets TestReplayRecordedSequence compares.
func TestJSONTypesMatchRecording(t *testing.T) {
	s := New(t, Config{Sync: true})
	u := s.URL()
	show := func(what string, got any, file string) {
	next:
		for _, l := range typeDiff(what, got, fixture(t, file)) {
			for _, a := range agentTypes {
				if strings.Contains(l, a) {
					continue next
				}
			}
			t.Error(l)
		}
	}
	r := do(t, "GET", u+"/v1/nodes?resources=true", nil)
	nodes := decode(t, r.body)
	show("nodes", nodes, "nodes-list-resources.json")
	nodeID := nodes.([]any)[0].(map[string]any)["ID"].(string)
	show("node", decode(t, do(t, "GET", u+"/v1/node/"+nodeID, nil).body), "node.json")
	show("register", decode(t, do(t, "PUT", u+"/v1/jobs", readFixture(t, "job-register.request.json")).body), "job-register.response.json")
	show("job", decode(t, do(t, "GET", u+"/v1/job/train-fx", nil).body), "job.json")
	allocs := decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body)
	show("allocs", allocs, "job-allocations.json")
	first := allocs.([]any)[0].(map[string]any)["ID"].(string)
	show("alloc", decode(t, do(t, "GET", u+"/v1/allocation/"+first, nil).body), "allocation.json")
	show("evals", decode(t, do(t, "GET", u+"/v1/job/train-fx/evaluations", nil).body), "job-evaluations.json")
	show("scaleup", decode(t, do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-up.request.json")).body), "job-scale-up.response.json")
	show("scalestatus", decode(t, do(t, "GET", u+"/v1/job/train-fx/scale", nil).body), "job-scale-status.json")
	show("summary", decode(t, do(t, "GET", u+"/v1/job/train-fx/summary", nil).body), "job-summary.json")
	show("scaledown", decode(t, do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-down.request.json")).body), "job-scale-down.response.json")
	allocs = decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body)
	show("allocs-scalein", allocs, "job-allocations-after-scale-in.json")
	var w1 string
	for _, a := range allocs.([]any) {
		m := a.(map[string]any)
		if m["Name"] == "train-fx.workers[1]" && m["DesiredStatus"] == "run" {
			w1 = m["ID"].(string)
		}
	}
	show("allocstop", decode(t, do(t, "POST", u+"/v1/allocation/"+w1+"/stop", nil).body), "allocation-stop.json")
	show("allocstopped", decode(t, do(t, "GET", u+"/v1/allocation/"+w1, nil).body), "allocation-stopped.json")
	show("allocs-stop", decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body), "job-allocations-after-stop.json")
	show("scaleover", decode(t, do(t, "POST", u+"/v1/job/train-fx/scale", readFixture(t, "job-scale-over-capacity.request.json")).body), "job-scale-over-capacity.response.json")
	show("summaryq", decode(t, do(t, "GET", u+"/v1/job/train-fx/summary", nil).body), "job-summary-queued.json")
	show("scalestatusq", decode(t, do(t, "GET", u+"/v1/job/train-fx/scale", nil).body), "job-scale-status-queued.json")
	show("evalsb", decode(t, do(t, "GET", u+"/v1/job/train-fx/evaluations", nil).body), "job-evaluations-blocked.json")
	show("allocs-over", decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body), "job-allocations-over-capacity.json")
	show("purge", decode(t, do(t, "DELETE", u+"/v1/job/train-fx?purge=true", nil).body), "job-deregister-purge.json")
	show("allocs-purge", decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body), "job-allocations-after-purge.json")
}
