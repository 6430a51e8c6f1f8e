package workertest

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSeed is EDL_TEST_SEED when set (to replay a failure), else a fresh
// seed; either way a failing test says how to replay it.
func TestSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("EDL_TEST_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("EDL_TEST_SEED=%q: want an unsigned integer: %v", v, err)
		}
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: EDL_TEST_SEED=%d go test ./worker -run '^%s$'", seed, t.Name())
		}
	})
	return seed
}
