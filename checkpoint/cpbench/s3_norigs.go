//go:build !rigs

package cpbench

import (
	"context"
	"errors"
)

// startS3 is the S3 server of the S3 figures; without the rigs build tag
// the SeaweedFS harness is not in the binary (it stays out of the product).
func startS3(context.Context, string, string, string, string) (string, func(), error) {
	return "", nil, errors.New("the SeaweedFS harness (checkpoint/weed) is not in this edl, which is built without the rigs tag: build it with `go build -tags rigs ./cmd/edl` (make bench does)")
}
