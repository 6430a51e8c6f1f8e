package nomadtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEventStreamMatchesRecording: the event stream's frames have the
// recorded shapes (frame, event, Allocation and Job payloads), start with
// a heartbeat, and the register / placement / start of the recording come
// as JobRegistered, PlanResult and AllocationUpdated events.
func TestEventStreamMatchesRecording(t *testing.T) {
	s := New(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL()+"/v1/event/stream?topic=Allocation:train-fx&topic=Job:train-fx&index=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	frames := make(chan any, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			frames <- decode(t, sc.Bytes())
		}
		close(frames)
	}()
	do(t, "PUT", s.URL()+"/v1/jobs", readFixture(t, "job-register.request.json"))
	settle(t, s)
	do(t, "PUT", s.URL()+"/v1/jobs", readFixture(t, "error-job-register-batch-update.request.json")) // refused: no event
	// An unrelated job: filtered out.
	if _, _, err := s.Client().Jobs().Register(batchJob("other", 1, nil), nil); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	var got []any
	timeout := time.After(time.Second)
collect:
	for {
		select {
		case f := <-frames:
			got = append(got, f)
		case <-timeout:
			break collect
		}
	}
	rec := fixture(t, "event-stream.json").([]any)
	if len(got) == 0 || len(got[0].(map[string]any)) != 0 {
		t.Fatalf("first frame %v, want the {} heartbeat", got)
	}
	types := map[string]bool{}
	for _, f := range got[1:] {
		if keys := fmt.Sprint(sortedKeys(f.(map[string]any))); keys != "[Events Index]" {
			t.Errorf("frame keys %s, want [Events Index]", keys)
		}
		for _, e := range f.(map[string]any)["Events"].([]any) {
			m := e.(map[string]any)
			if !strings.Contains(m["Key"].(string), "-") && m["Key"] != "train-fx" {
				t.Errorf("event for %v passed the filter", m["Key"])
			}
			types[m["Topic"].(string)+"/"+m["Type"].(string)] = true
			// Compare with a recorded event of the same topic.
			for _, rf := range rec[1:] {
				if rf.(map[string]any)["Events"] == nil {
					continue
				}
				re := rf.(map[string]any)["Events"].([]any)[0].(map[string]any)
				if re["Topic"] == m["Topic"] {
					sameShape(t, "event "+m["Topic"].(string), m, re, ".Payload.Job.TaskGroups[].Tasks[].Config", ".Payload.Allocation.Metrics.ScoreMetaData", ".Payload.Allocation.SigningKeyID")
					break
				}
			}
		}
	}
	var list []string
	for k := range types {
		list = append(list, k)
	}
	sort.Strings(list)
	want := []string{"Allocation/AllocationUpdated", "Allocation/PlanResult", "Job/JobRegistered", "Job/PlanResult"}
	if d := cmp.Diff(want, list); d != "" {
		t.Errorf("event types (-want +got):\n%s", d)
	}
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
