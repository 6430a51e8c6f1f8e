//go:build rigs

package cpbench

import (
	"context"

	"github.com/edl-nomad/edl/checkpoint/weed"
)

// startS3 starts weed mini from bin in dir with the one identity
// accessKey/secretKey: its S3 endpoint (host:port, plain HTTP) and how to
// stop it.
func startS3(ctx context.Context, bin, dir, accessKey, secretKey string) (endpoint string, stop func(), err error) {
	srv, err := weed.Start(ctx, weed.Config{Bin: bin, Dir: dir, AccessKey: accessKey, SecretKey: secretKey})
	if err != nil {
		return "", nil, err
	}
	return srv.Endpoint, srv.Stop, nil
}
