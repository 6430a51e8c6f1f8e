package nomadtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func TestLogsEndpointErrors(t *testing.T) {
	s := New(t, Config{})
	if _, aerr := s.register(&api.JobRegisterRequest{Job: batchJob("j", 1, nil)}, "default"); aerr != nil {
		t.Fatal(aerr.body)
	}
	var allocs []api.Allocation
	for deadline := time.Now().Add(5 * time.Second); len(allocs) == 0; time.Sleep(10 * time.Millisecond) {
		if allocs = s.Allocations("default", "j"); len(allocs) == 0 && time.Now().After(deadline) {
			t.Fatal("no allocation placed after 5s")
		}
	}
	alloc := allocs[0].ID
	s.AppendLog(alloc, "worker", "stdout", []byte("hello\nworld\n"))
	for _, tc := range []struct {
		query  string
		status int
		body   string
	}{
		{"task=worker&type=stdout", 200, "hello\nworld\n"},
		{"task=worker&type=stdout&origin=end&offset=6", 200, "world\n"},
		{"task=worker&type=stdout&offset=6", 200, "world\n"},
		{"task=worker&type=stderr", 200, ""},
		{"type=stdout", 400, "must provide task name"},
		{"task=nope&type=stdout", 400, "unknown task name"},
		{"task=worker&type=both", 400, "log type"},
		{"task=worker&type=stdout&origin=middle", 400, "origin"},
		{"task=worker&type=stdout&offset=-1", 400, "offset"},
	} {
		resp, err := http.Get(s.URL() + "/v1/client/fs/logs/" + alloc + "?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d (%s), want %d", tc.query, resp.StatusCode, b, tc.status)
			continue
		}
		if tc.status != 200 {
			if !strings.Contains(string(b), tc.body) {
				t.Errorf("%s: body %q, want %q in it", tc.query, b, tc.body)
			}
			continue
		}
		var data []byte
		dec := json.NewDecoder(strings.NewReader(string(b)))
		for dec.More() {
			var f api.StreamFrame
			if err := dec.Decode(&f); err != nil {
				t.Fatalf("%s: frame: %v", tc.query, err)
			}
			data = append(data, f.Data...)
		}
		if string(data) != tc.body {
			t.Errorf("%s: data %q, want %q", tc.query, data, tc.body)
		}
	}
	resp, err := http.Get(s.URL() + "/v1/client/fs/logs/00000000-0000-0000-0000-000000000000?task=worker&type=stdout")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown allocation: %d, want 404", resp.StatusCode)
	}
}
