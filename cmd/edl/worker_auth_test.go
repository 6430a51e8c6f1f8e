package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWorkerRedisAuth: the login comes from the environment or a file,
// the file is removed once read, and none of it stays in the environment
// the program would inherit.
func TestWorkerRedisAuth(t *testing.T) {
	f := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(f, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name               string
		env                map[string]string
		wantUser, wantPass string
		wantErr            bool
	}{
		{"environment", map[string]string{"EDL_REDIS_USER": "edl-job-j1", "EDL_REDIS_PASSWORD": "p"}, "edl-job-j1", "p", false},
		{"file", map[string]string{"EDL_REDIS_USER": "edl-job-j1", "EDL_REDIS_PASSWORD_FILE": f}, "edl-job-j1", "s3cret", false},
		{"missing file", map[string]string{"EDL_REDIS_PASSWORD_FILE": f + ".none"}, "", "", true},
		{"nothing", nil, "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			user, pass, err := workerRedisAuth(os.Getenv)
			if user != tc.wantUser || pass != tc.wantPass || (err != nil) != tc.wantErr {
				t.Fatalf("got %q %q %v, want %q %q (error %v)", user, pass, err, tc.wantUser, tc.wantPass, tc.wantErr)
			}
			for _, k := range []string{"EDL_REDIS_USER", "EDL_REDIS_PASSWORD", "EDL_REDIS_PASSWORD_FILE"} {
				if v, ok := os.LookupEnv(k); ok {
					t.Errorf("%s=%q left in the environment", k, v)
				}
			}
		})
	}
	if _, err := os.Stat(f); !os.IsNotExist(err) {
		t.Errorf("password file still there (%v)", err)
	}
}
