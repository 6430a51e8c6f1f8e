package builtin

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// The multi-process tests re-run this test binary as worker processes:
// with EDL_WORKER_CHILD set, TestMain runs one worker instead of the tests.
func TestMain(m *testing.M) { workertest.Main(m, runChild) }

func runChild(ctx context.Context, ce workertest.ChildEnv) int {
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
