package nomadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// evalLabels names the recorded writes' evaluations: the register, the
// three scales and the allocation stop answer with their EvalID.
func evalLabels(t *testing.T, ids map[string]string) map[string]string {
	t.Helper()
	for label, file := range map[string]string{"register": "job-register.response.json", "up": "job-scale-up.response.json",
		"down": "job-scale-down.response.json", "stop": "allocation-stop.json", "over": "job-scale-over-capacity.response.json"} {
		ids[fixture(t, file).(map[string]any)["EvalID"].(string)] = label
	}
	return ids
}

// versionsAndEvals reduces an allocation list to sorted "name version
// desired/client eval" lines, the evaluation named by the write that made it.
func versionsAndEvals(v any, labels map[string]string) string {
	var lines []string
	for _, e := range v.([]any) {
		m := e.(map[string]any)
		lines = append(lines, fmt.Sprintf("%v v%v %v/%v eval=%s", m["Name"], m["JobVersion"], m["DesiredStatus"], m["ClientStatus"], labels[m["EvalID"].(string)]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestStoppedAllocationsKeepTheirEvalAndVersion replays the recorded
// sequence and compares each allocation's JobVersion and EvalID with the
// recording: an allocation the scheduler stops (scale-in, alloc stop,
// purge) keeps the job version and evaluation it was placed or last
// updated by; a live one updated in place to a new job version takes that
// version and the evaluation of the write.
func TestStoppedAllocationsKeepTheirEvalAndVersion(t *testing.T) {
	s := New(t, Config{})
	u := s.URL()
	got := map[string]string{}
	rec := evalLabels(t, map[string]string{})
	write := func(label, method, path, file string) {
		var body []byte
		if file != "" {
			body = readFixture(t, file)
		}
		r := do(t, method, u+path, body)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", label, r.status, r.body)
		}
		got[decode(t, r.body).(map[string]any)["EvalID"].(string)] = label
		settle(t, s)
	}
	check := func(what, file string) any {
		t.Helper()
		v := decode(t, do(t, "GET", u+"/v1/job/train-fx/allocations", nil).body)
		if d := cmp.Diff(versionsAndEvals(fixture(t, file), rec), versionsAndEvals(v, got)); d != "" {
			t.Errorf("%s (-recorded +got):\n%s", what, d)
		}
		return v
	}
	write("register", "PUT", "/v1/jobs", "job-register.request.json")
	check("after register", "job-allocations.json")
	write("up", "POST", "/v1/job/train-fx/scale", "job-scale-up.request.json")
	write("down", "POST", "/v1/job/train-fx/scale", "job-scale-down.request.json")
	allocs := check("after scale-in", "job-allocations-after-scale-in.json")
	var w1 string
	for _, a := range allocs.([]any) {
		if m := a.(map[string]any); m["Name"] == "train-fx.workers[1]" && m["DesiredStatus"] == "run" {
			w1 = m["ID"].(string)
		}
	}
	write("stop", "POST", "/v1/allocation/"+w1+"/stop", "")
	check("after alloc stop", "job-allocations-after-stop.json")
	write("over", "POST", "/v1/job/train-fx/scale", "job-scale-over-capacity.request.json")
	check("over capacity", "job-allocations-over-capacity.json")
	write("purge", "DELETE", "/v1/job/train-fx?purge=true", "")
	check("after purge", "job-allocations-after-purge.json")
}

// allocEvents lists the Allocation events for one name of an event
// stream, one entry per frame (events of a frame sorted): "Type
// desired/client migrate next prev".
func allocEvents(frames []any, name string) []string {
	var out []string
	for _, f := range frames {
		evs, _ := f.(map[string]any)["Events"].([]any)
		var lines []string
		for _, e := range evs {
			m := e.(map[string]any)
			if m["Topic"] != "Allocation" {
				continue
			}
			a := m["Payload"].(map[string]any)["Allocation"].(map[string]any)
			if a["Name"] != name {
				continue
			}
			dt, _ := a["DesiredTransition"].(map[string]any)
			lines = append(lines, fmt.Sprintf("%v %v/%v migrate=%v next=%v prev=%v", m["Type"], a["DesiredStatus"], a["ClientStatus"],
				dt["Migrate"], a["NextAllocation"] != nil && a["NextAllocation"] != "", a["PreviousAllocation"] != nil && a["PreviousAllocation"] != ""))
		}
		if len(lines) > 0 {
			sort.Strings(lines)
			out = append(out, strings.Join(lines, "; "))
		}
	}
	return out
}

// TestAllocStopEventsMatchRecording: POST /v1/allocation/:id/stop only
// marks the allocation for migration (AllocationUpdateDesiredStatus, still
// desired run) and the scheduler then stops it and places the replacement
// in one plan, as recorded in event-stream.json (workers[1], indexes 205
// and 206).
func TestAllocStopEventsMatchRecording(t *testing.T) {
	s := New(t, Config{})
	frames := streamFrames(t, s, "/v1/event/stream?topic=Allocation:train-fx&index=1")
	u := s.URL()
	do(t, "PUT", u+"/v1/jobs", readFixture(t, "job-register.request.json"))
	settle(t, s)
	var w1 string
	for _, a := range s.Allocations("default", "train-fx") {
		if a.Name == "train-fx.workers[1]" {
			w1 = a.ID
		}
	}
	r := do(t, "POST", u+"/v1/allocation/"+w1+"/stop", nil)
	a := decode(t, do(t, "GET", u+"/v1/allocation/"+w1, nil).body).(map[string]any)
	if a["DesiredStatus"] != "run" || a["ModifyIndex"] != json.Number(r.index) {
		t.Errorf("right after stop: desired %v, modify index %v (answer %s); recorded: still run, modified at the answer's index", a["DesiredStatus"], a["ModifyIndex"], r.index)
	}
	settle(t, s)
	want := fromStop(allocEvents(fixture(t, "event-stream.json").([]any), "train-fx.workers[1]"))
	got := fromStop(allocEvents(frames(), "train-fx.workers[1]"))
	if len(want) < 2 || len(got) < 2 {
		t.Fatalf("events from the stop on: recorded %q, got %q", want, got)
	}
	if d := cmp.Diff(want[:2], got[:2]); d != "" {
		t.Errorf("workers[1]: the stop's event and the plan's (-recorded +got):\n%s", d)
	}
}

func fromStop(evs []string) []string {
	for i, e := range evs {
		if strings.HasPrefix(e, "AllocationUpdateDesiredStatus") {
			return evs[i:]
		}
	}
	return nil
}

// streamFrames opens an event stream; the returned func gives the frames
// received so far, after a short quiet wait.
func streamFrames(t *testing.T, s *Server, path string) func() []any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	var mu sync.Mutex
	var frames []any
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			var v any
			if json.Unmarshal(sc.Bytes(), &v) == nil {
				mu.Lock()
				frames = append(frames, v)
				mu.Unlock()
			}
		}
	}()
	return func() []any {
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return append([]any(nil), frames...)
	}
}

// TestListsAreOrderedByIDAsRecorded: Nomad lists a job's allocations and
// evaluations, and /v1/allocations, by ID (every recorded list is), not
// by creation: a replacement may come before the allocation it replaces.
func TestListsAreOrderedByIDAsRecorded(t *testing.T) {
	byID := func(v any) bool {
		var ids []string
		for _, e := range v.([]any) {
			ids = append(ids, e.(map[string]any)["ID"].(string))
		}
		return sort.StringsAreSorted(ids)
	}
	for _, f := range []string{"job-allocations-over-capacity.json", "job-allocations-after-purge.json", "job-evaluations-blocked.json"} {
		if !byID(fixture(t, f)) {
			t.Fatalf("recording %s is not ordered by ID", f)
		}
	}
	s := New(t, Config{Sync: true})
	c := s.Client()
	for i := 0; i < 4; i++ { // placements and replacements: creation order is not ID order
		if _, _, err := c.Jobs().Register(batchJob("a", 3+i%2, nil), nil); err != nil {
			t.Fatal(err)
		}
		for _, a := range s.Allocations("default", "a") {
			if a.DesiredStatus == "run" {
				do(t, "POST", s.URL()+"/v1/allocation/"+a.ID+"/stop", nil)
				break
			}
		}
	}
	for _, path := range []string{"/v1/job/a/allocations", "/v1/allocations", "/v1/allocations?namespace=*", "/v1/job/a/evaluations"} {
		v := decode(t, do(t, "GET", s.URL()+path, nil).body)
		if n := len(v.([]any)); n < 5 {
			t.Fatalf("%s: %d entries, want several", path, n)
		}
		if !byID(v) {
			t.Errorf("%s is not ordered by ID", path)
		}
	}
}
