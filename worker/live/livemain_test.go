package live

import (
	"context"
	"testing"

	"github.com/edl-nomad/edl/worker/internal/workertest"
)

// The live multi-process tests (liveCluster) re-run this test binary as
// live workers: with EDL_WORKER_CHILD set, TestMain runs one
// (runLiveChild) instead of the tests.
func TestMain(m *testing.M) {
	workertest.Main(m, func(ctx context.Context, ce workertest.ChildEnv) int {
		return runLiveChild(ctx, ce.Cfg, ce.Deps, ce.Env)
	})
}
