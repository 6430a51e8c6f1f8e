package main

import (
	"context"

	"github.com/edl-nomad/edl/internal/bench"
)

// api calls the running API as the dev tenant "default" (the benchmarks' helper).
func (d *devEnv) api(ctx context.Context, method, path string, body, out any) error {
	return (&bench.Dev{APIURL: d.apiURL, Tokens: d.tokens}).API(ctx, method, path, body, out)
}
