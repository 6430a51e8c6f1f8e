//go:build rigs

package bench

import "github.com/edl-nomad/edl/checkpoint/weed"

// lookWeed finds the SeaweedFS binary of the S3 figures (weed.LookBinary).
func lookWeed(explicit string, dirs ...string) (string, error) {
	return weed.LookBinary(explicit, dirs...)
}
