package nomadx_test

import (
	"strings"
	"testing"

	"github.com/edl-nomad/edl/nomadx"
)

// TestTemplateWorkerRedisLogin: with the planner's per-job login, the
// task gets it in its environment (as registered with the fake Nomad),
// and the worker's arguments, which any process can read, carry no
// password even when the configured URL has one.
func TestTemplateWorkerRedisLogin(t *testing.T) {
	tests := []struct {
		name     string
		auth     bool
		wantURL  string
		wantUser string
	}{
		{"per-job login", true, "redis://10.0.0.5:6379/0", "edl-job-j1"},
		{"opt-out: the URL's own login", false, "redis://:admin-pw@10.0.0.5:6379/0", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nj := registered(t, func(c *nomadx.Config) {
				c.Driver, c.RedisURL = nomadx.DriverRawExec, "redis://:admin-pw@10.0.0.5:6379/0"
				if tc.auth {
					c.WorkerRedisAuth = func(id string) (string, string) { return "edl-job-" + id, "pw-of-" + id }
				}
			}, execJob("j1", ""))
			task := nj.TaskGroups[0].Tasks[0]
			args, _ := task.Config["args"].([]any)
			var url string
			for i, a := range args {
				if a == "--redis" && i+1 < len(args) {
					url, _ = args[i+1].(string)
				}
			}
			if url != tc.wantURL {
				t.Errorf("--redis %q, want %q (args %v)", url, tc.wantURL, args)
			}
			if got := task.Env["EDL_REDIS_USER"]; got != tc.wantUser {
				t.Errorf("EDL_REDIS_USER %q, want %q", got, tc.wantUser)
			}
			if tc.auth && task.Env["EDL_REDIS_PASSWORD"] != "pw-of-j1" {
				t.Errorf("EDL_REDIS_PASSWORD %q, want the job's", task.Env["EDL_REDIS_PASSWORD"])
			}
			for _, a := range args {
				if s, _ := a.(string); tc.auth && strings.Contains(s, "pw") {
					t.Errorf("a password on the worker's command line: %q", s)
				}
			}
		})
	}
}
