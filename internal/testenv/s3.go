package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/edl-nomad/edl/checkpoint/versitygw"
)

// S3Server is a real S3 server, the Versity S3 Gateway with its posix
// backend (checkpoint/versitygw), on a loopback port.
type S3Server struct {
	*versitygw.Server
	AccessKey, SecretKey string
}

// StartS3Server starts versitygw with its data in dir and a random
// identity; callers must Stop it. The binary comes from EDL_VERSITYGW, the
// repository's .tools/bin, or PATH.
func StartS3Server(ctx context.Context, dir string) (*S3Server, error) {
	bin, err := lookBinary("EDL_VERSITYGW", "versitygw")
	if err != nil {
		return nil, err
	}
	ak, sk := "edltest"+RandomID(4), RandomID(20)
	srv, err := versitygw.Start(ctx, versitygw.Config{Bin: bin, Dir: dir, AccessKey: ak, SecretKey: sk})
	if err != nil {
		return nil, err
	}
	return &S3Server{Server: srv, AccessKey: ak, SecretKey: sk}, nil
}

// S3 is what a test gets: a server, a fresh bucket of its own, a key
// prefix inside it, and a client.
type S3 struct {
	Server    *S3Server
	Endpoint  string // host:port, plain HTTP
	AccessKey string
	SecretKey string
	Region    string
	Bucket    string // created for this test
	Prefix    string // "" or a path inside the bucket, no slashes at the ends
	Client    *minio.Client
}

// URL is the s3://BUCKET/PREFIX form checkpoint.Open accepts; the endpoint
// and credentials go in checkpoint.Options (see Options in the checkpoint
// tests) or ride as ?endpoint=...&tls=false.
func (s *S3) URL() string {
	if s.Prefix == "" {
		return "s3://" + s.Bucket
	}
	return "s3://" + s.Bucket + "/" + s.Prefix
}

// EndpointURL is the endpoint with its scheme, as AWS_ENDPOINT_URL takes it.
func (s *S3) EndpointURL() string { return "http://" + s.Endpoint }

var sharedS3 sharedServer[*S3Server]

// NewS3 gives the test the package's shared S3 server (started on first
// use, stopped by Main) and a fresh bucket, emptied and removed when the
// test ends. Use NewS3Server for a server of its own.
func NewS3(t testing.TB) *S3 {
	t.Helper()
	return newS3For(t, sharedS3.get(t, "s3", "edl-s3-", startS3Server))
}

// NewS3Server starts an S3 server for this test alone (for tests that kill
// or restart it: s.Server.Kill, s.Server.Restart) and stops it when the
// test ends.
func NewS3Server(t testing.TB) *S3 {
	t.Helper()
	return newS3For(t, ownServer(t, "s3", startS3Server))
}

// startS3Server is StartS3Server in the background context.
func startS3Server(dir string) (*S3Server, error) { return StartS3Server(context.Background(), dir) }

func newS3For(t testing.TB, srv *S3Server) *S3 {
	t.Helper()
	c, err := srv.Client()
	if err != nil {
		t.Fatalf("s3 client: %v", err)
	}
	bucket := "t-" + slug(t.Name(), 40) + "-" + RandomID(4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("create bucket %s on %s: %v", bucket, srv.Endpoint, err)
	}
	t.Cleanup(func() {
		removeBucket(c, bucket)
		if t.Failed() {
			t.Logf("S3 server %s, its output since it last started:\n%s", srv.Endpoint, lastLines(srv.Log(), 40))
		}
	})
	return &S3{
		Server:    srv,
		Endpoint:  srv.Endpoint,
		AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey,
		Region:    "us-east-1",
		Bucket:    bucket,
		Prefix:    "p-" + RandomID(3),
		Client:    c,
	}
}

// removeBucket empties and removes a test's bucket, best effort: the server
// may have been killed by the test.
func removeBucket(c *minio.Client, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	objs := c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true})
	for err := range c.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		if err.Err != nil {
			return
		}
	}
	_ = c.RemoveBucket(ctx, bucket) // what remains goes with the server
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
