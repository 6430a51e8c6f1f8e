package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/edl-nomad/edl/internal/childproc"
)

// EdlEnv names an edl binary built for this test run (by `make test`, with
// the race detector): EdlBinary returns it instead of building one. Only the
// Makefile sets it, right after building the binary from this checkout.
const EdlEnv = "EDL_TEST_EDL"

// EdlBinary returns the edl command for tests that run it as a separate
// process (`edl dev`, `edl worker`): the binary $EDL_TEST_EDL names, else one
// built into dir. It gets the race detector when the test binary has it:
// those processes are where the product's own goroutines run in such tests,
// and `make test` builds every package under -race, so the race-instrumented
// dependencies are compiled once for the test binaries and this build alike
// (a plain build here compiled the whole product a second time, about 2.3
// minutes on a fresh 2-core machine), and linked once for every package that
// runs it.
func EdlBinary(dir string) (string, error) {
	if p := os.Getenv(EdlEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %w", EdlEnv, err)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "edl")
	args := []string{"build"}
	if RaceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "-o", out, "./cmd/edl")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	// go-nvml's cgo prolog warns about deprecated NVML calls; the Makefile sets
	// the same flags, so this build reuses its cached objects.
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %v: %w\n%s", args, err, b)
	}
	return out, nil
}

// Output collects a child process's output for a test to read while the
// process still writes it (exec copies a non-file writer from a goroutine of
// its own, so a plain bytes.Buffer read then is a data race): childproc's
// Buffer.
type Output = childproc.Buffer
