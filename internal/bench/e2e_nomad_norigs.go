//go:build !rigs

package bench

import (
	"context"
	"fmt"
	"io"
)

// runBenchE2ENomad needs the fake Nomad, which only a rigs build carries.
func runBenchE2ENomad(context.Context, nomadBenchOpts, io.Writer) error {
	return fmt.Errorf("edl bench e2e --nomad: %w", errNoRigs("the fake Nomad (nomadx/nomadtest)"))
}
