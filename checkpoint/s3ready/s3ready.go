package s3ready

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edl-nomad/edl/internal/childproc"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Client is a minio client for a loopback server with static credentials;
// one retry, so a probe against a server still starting fails fast.
func Client(endpoint, accessKey, secretKey string) (*minio.Client, error) {
	return minio.New(endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(accessKey, secretKey, ""),
		Region:     "us-east-1",
		MaxRetries: 1,
	})
}

// Probe says whether the server serves what the checkpoint store needs:
// it makes bucket if missing, writes one object and removes it.
func Probe(ctx context.Context, c *minio.Client, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ok, err := c.BucketExists(ctx, bucket)
	if err != nil {
		return err
	}
	if !ok {
		if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
			return err
		}
	}
	body := []byte("ready")
	if _, err := c.PutObject(ctx, bucket, "probe", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		return err
	}
	return c.RemoveObject(ctx, bucket, "probe", minio.RemoveObjectOptions{})
}

// WaitChild polls the server child p every interval, with the probe on c,
// until an object round-trips (nil), p exits first, or timeout passes; the
// error says which, with the last probe's error.
func WaitChild(ctx context.Context, p *childproc.Proc, c *minio.Client, interval, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	err := p.WaitReady(ctx, interval, 0, func() error {
		last = Probe(ctx, c, "edl-ready-probe")
		return last
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, childproc.ErrExited):
		return fmt.Errorf("exited during start (last probe: %v)", last)
	}
	return fmt.Errorf("not ready after %s: %v", timeout, last)
}
