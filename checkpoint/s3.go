package checkpoint

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const (
	defaultPartSize    = 16 << 20
	defaultPartThreads = 4
	// defaultStallTimeout is minio-go's wait for response headers.
	defaultStallTimeout = time.Minute
)

// s3Store keeps objects under prefix in one bucket of an S3-compatible
// server. Uploads larger than a part go as a multipart upload; a reader
// that is also an io.ReaderAt (a bytes.Reader, a file) uploads its parts in
// parallel without copying, any other reader through PartThreads buffers
// of PartSize each.
type s3Store struct {
	client   *minio.Client
	bucket   string
	prefix   string // "" or ends with "/"
	url      string
	partSize uint64
	threads  uint
}

// s3Endpoint splits "http(s)://host:port" or "host:port" into the host and
// whether to use TLS.
func s3Endpoint(endpoint string, disableTLS bool) (host string, secure bool, err error) {
	if endpoint == "" {
		return "s3.amazonaws.com", !disableTLS, nil
	}
	if !strings.Contains(endpoint, "://") {
		return strings.TrimSuffix(endpoint, "/"), !disableTLS, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", false, fmt.Errorf("invalid S3 endpoint %q", endpoint)
	}
	switch u.Scheme {
	case "http":
		return u.Host, false, nil
	case "https":
		return u.Host, !disableTLS, nil
	}
	return "", false, fmt.Errorf("invalid S3 endpoint %q: scheme must be http or https", endpoint)
}

func openS3(ctx context.Context, u *url.URL, opts Options) (Store, error) {
	name := redact(u.String())
	bucket := u.Host
	if bucket == "" {
		return nil, fmt.Errorf("open store %s: no bucket", name)
	}
	q := u.Query()
	if v := q.Get("endpoint"); v != "" {
		opts.Endpoint = v
	}
	if v := q.Get("region"); v != "" {
		opts.Region = v
	}
	switch q.Get("tls") {
	case "":
	case "false", "0", "off":
		opts.DisableTLS = true
	case "true", "1", "on":
		opts.DisableTLS = false
	default:
		return nil, fmt.Errorf("open store %s: tls=%q: want true or false", name, q.Get("tls"))
	}
	host, secure, err := s3Endpoint(opts.Endpoint, opts.DisableTLS)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	region := opts.Region
	if region == "" {
		region = "us-east-1"
	}
	tr, err := stallTransport(secure, opts.StallTimeout)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	client, err := minio.New(host, &minio.Options{
		Creds:     credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, opts.SessionToken),
		Secure:    secure,
		Region:    region,
		Transport: tr,
		// A few quick retries; the Uploader retries with its own backoff
		// when the store stays down.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	s := &s3Store{
		client:   client,
		bucket:   bucket,
		prefix:   strings.Trim(u.Path, "/"),
		url:      "s3://" + bucket + u.Path,
		partSize: opts.PartSize,
		threads:  opts.PartThreads,
	}
	if s.prefix != "" {
		s.prefix += "/"
	}
	if s.partSize == 0 {
		s.partSize = defaultPartSize
	}
	if s.threads == 0 {
		s.threads = defaultPartThreads
	}
	ok, err := client.BucketExists(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("open store %s (endpoint %s): %w", name, host, describeS3Error(err))
	}
	if !ok {
		return nil, fmt.Errorf("open store %s (endpoint %s): bucket %q does not exist", name, host, bucket)
	}
	return s, nil
}

// stallTransport is minio-go's default transport whose connections fail
// a read or write that moves nothing for timeout (default 1 min). The
// transport alone bounds only the wait for a response's headers: a body
// going to, or coming from, a server that stopped answering blocked for
// ever, and with it the job's uploader or restore.
func stallTransport(secure bool, timeout time.Duration) (*http.Transport, error) {
	if timeout <= 0 {
		timeout = defaultStallTimeout
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &stallConn{Conn: c, timeout: timeout}, nil
	}
	return tr, nil
}

// stallConn pushes its deadlines forward at every read and write, so only
// a connection that stalls for timeout fails. A write moves the read
// deadline too: the transport's reader waits on an idle connection from
// before the request was sent.
type stallConn struct {
	net.Conn
	timeout time.Duration
}

func (c *stallConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(p)
}

func (c *stallConn) Write(p []byte) (int, error) {
	d := time.Now().Add(c.timeout)
	_ = c.Conn.SetWriteDeadline(d)
	_ = c.Conn.SetReadDeadline(d)
	return c.Conn.Write(p)
}

// describeS3Error keeps the server's code and message; minio-go's errors
// never carry the secret key, only the access key id at most.
func describeS3Error(err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == "" {
		return err
	}
	return fmt.Errorf("%s: %s: %w", resp.Code, resp.Message, err)
}

func (s *s3Store) String() string { return s.url }

func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	opts := minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    s.partSize,
		NumThreads:  s.threads,
	}
	body := r
	var counter *countingReader
	if _, isReaderAt := r.(io.ReaderAt); !isReaderAt || size < 0 {
		counter = &countingReader{r: r}
		body = counter
		// Read parts into a bounded set of buffers and upload them in
		// parallel, rather than one part at a time.
		opts.ConcurrentStreamParts = s.threads > 1
	}
	info, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, body, size, opts)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, describeS3Error(err))
	}
	if size >= 0 && info.Size != size {
		return fmt.Errorf("put %s: stored %d bytes, want %d", key, info.Size, size)
	}
	if counter != nil && size >= 0 && counter.n != size {
		return fmt.Errorf("put %s: read %d bytes, want %d", key, counter.n, size)
	}
	return nil
}

func isNotFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchKey" || code == "NotFound"
}

func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	// One GET whose body is the stream. (minio-go's lazy Client.GetObject
	// checks with a HEAD and sends the GET at the first Read: an object
	// deleted in between, by a Prune, failed that Read with a bare
	// NoSuchKey, after the caller had been told the object was there.)
	body, _, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("get %s: %w", key, describeS3Error(err))
	}
	return body, nil
}

func (s *s3Store) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	st, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		if isNotFound(err) {
			return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, ErrNotFound)
		}
		return ObjectInfo{}, fmt.Errorf("stat %s: %w", key, describeS3Error(err))
	}
	return ObjectInfo{Key: key, Size: st.Size, Modified: st.LastModified}, nil
}

func (s *s3Store) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine if we return early
	var out []ObjectInfo
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("list %q: %w", prefix, describeS3Error(obj.Err))
		}
		key := strings.TrimPrefix(obj.Key, s.prefix)
		if strings.HasSuffix(key, "/") {
			continue // a directory marker some servers report
		}
		out = append(out, ObjectInfo{Key: key, Size: obj.Size, Modified: obj.LastModified})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	return out, nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", key, describeS3Error(err))
	}
	return nil
}

// sweepTemps aborts the multipart uploads under prefix begun before
// cutoff: what a Put leaves when its process dies midway. Their parts hold
// storage (billed, on a cloud store) and List does not show them, so
// without this only a bucket lifecycle rule would ever free them.
func (s *s3Store) sweepTemps(ctx context.Context, prefix string, cutoff time.Time) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine if we return early
	var stale []minio.ObjectMultipartInfo
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, s.prefix+prefix, true) {
		if u.Err != nil {
			return 0, fmt.Errorf("sweep %q: %w", prefix, describeS3Error(u.Err))
		}
		if u.Initiated.Before(cutoff) {
			stale = append(stale, u)
		}
	}
	core := minio.Core{Client: s.client}
	n := 0
	for _, u := range stale {
		err := core.AbortMultipartUpload(ctx, s.bucket, u.Key, u.UploadID)
		if err != nil && !isNotFound(err) && minio.ToErrorResponse(err).Code != "NoSuchUpload" {
			return n, fmt.Errorf("sweep %q: abort the upload of %s: %w", prefix, strings.TrimPrefix(u.Key, s.prefix), describeS3Error(err))
		}
		n++
	}
	return n, nil
}
