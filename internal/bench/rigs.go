package bench

import "fmt"

// errNoRigs says that a benchmark needs a test rig (the fake Nomad, the
// SeaweedFS harness) that this binary is built without: the rigs are in
// an edl built with the rigs build tag only, so that the product binary
// never carries them.
func errNoRigs(rig string) error {
	return fmt.Errorf("%s is not in this edl, which is built without the rigs tag: build it with `go build -tags rigs ./cmd/edl` (make bench does)", rig)
}
