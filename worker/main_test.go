package worker

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/edl-nomad/edl/internal/testenv"
)

// The multi-process tests re-run this test binary as worker processes:
// with EDL_WORKER_CHILD set, TestMain runs one worker instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("EDL_WORKER_CHILD") != "" {
		os.Exit(runChild())
	}
	testenv.Main(m)
}

func runChild() int {
	// First of all: a SIGTERM that arrives while the process starts is a
	// graceful stop too (the randomized test sends some that early).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ce := childSetup()
	if ce.Code != 0 {
		return ce.Code
	}
	defer ce.Done()
	w, err := New(ce.Cfg, ce.Deps)
	if err != nil {
		ce.Log.Error("new worker", "err", err)
		return 2
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}
