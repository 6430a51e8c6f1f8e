package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// BuildEdl builds the edl command into out for tests that run it as a separate
// process (`edl dev`, `edl worker`). The binary gets the race detector when the
// test binary has it: those processes are where the product's own goroutines
// run in such tests, and `make test` builds every package under -race, so the
// race-instrumented dependencies are compiled once for the test binaries and
// this build alike (a plain build here compiled the whole product a second
// time, about 2.5 minutes on a fresh 2-core machine).
func BuildEdl(out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build"}
	if RaceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "-o", out, "./cmd/edl")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	// go-nvml's cgo prolog warns about deprecated NVML calls; the Makefile sets
	// the same flags, so a build from `make test` reuses its cached objects.
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, b)
	}
	if _, err := os.Stat(out); err != nil {
		return fmt.Errorf("go build wrote no %s: %w", filepath.Base(out), err)
	}
	return nil
}

// Output collects a child process's output for a test to read while the
// process still writes it (exec copies a non-file writer from a goroutine of
// its own, so a plain bytes.Buffer read then is a data race).
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
