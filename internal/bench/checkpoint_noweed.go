//go:build !rigs

package bench

// lookWeed: the SeaweedFS harness is only in a rigs build; without it the
// S3 figures are skipped with this reason.
func lookWeed(string, ...string) (string, error) {
	return "", errNoRigs("the SeaweedFS harness (checkpoint/weed)")
}
