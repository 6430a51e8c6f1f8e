package weed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // "" valid, else a word the error names
	}{
		{Config{AccessKey: "a", SecretKey: "s"}, ""},
		{Config{SecretKey: "s"}, "AccessKey"},
		{Config{AccessKey: "a"}, "SecretKey"},
		{Config{AccessKey: "a", SecretKey: "s", StartTimeout: -time.Second}, "StartTimeout"},
	} {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Validate = %v, want one naming %q", tc.cfg, err, tc.want)
		}
	}
}

func TestLookBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "weed")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := LookBinary(bin); err != nil || got != bin {
		t.Errorf("LookBinary(explicit) = %q, %v; want %q", got, err, bin)
	}
	if _, err := LookBinary(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("LookBinary(missing) = %v, want an error naming the path", err)
	}
	if got, err := LookBinary("", t.TempDir(), dir); err != nil || got != bin {
		t.Errorf("LookBinary(dirs) = %q, %v; want %q, found in the second dir", got, err, bin)
	}
}
