//go:build rigs

package weed

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint/s3ready"
)

// TestStartStoresAndStops runs a real weed mini (scripts/build-weed.sh;
// make bench builds it): it must serve S3 with its identity and free its
// port on Stop. Only with -tags rigs, the build that uses weed: make test
// does not build it.
func TestStartStoresAndStops(t *testing.T) {
	bin, err := LookBinary(os.Getenv("EDL_WEED"), filepath.Join("..", "..", ".tools", "bin"))
	if err != nil {
		t.Fatalf("no weed binary (scripts/build-weed.sh builds it, as make bench does): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := Start(ctx, Config{Bin: bin, Dir: t.TempDir(), AccessKey: "edltest", SecretKey: "edltest-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := s3ready.Probe(ctx, c, "edl-test"); err != nil {
		t.Fatalf("probe after Start: %v", err)
	}
	srv.Stop()
	if err := s3ready.Probe(ctx, c, "edl-test"); err == nil {
		t.Error("the server still answers after Stop")
	}
}
