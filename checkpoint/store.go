package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// ErrNotFound is returned by Get and Stat for a key that does not exist.
var ErrNotFound = errors.New("object not found")

// Store is a flat space of immutable objects named by slash-separated keys.
// A Put replaces the whole object atomically: a reader sees the old object or
// the new one, never part of one. Implementations are safe for concurrent use.
type Store interface {
	// Put streams r into key. size is the length when known, else -1; a
	// reader that yields a different number of bytes than a known size is
	// an error and leaves the old object in place.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get streams the object; the caller closes it. ErrNotFound if absent.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat returns the object's size and modification time.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes key; deleting an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// String is the store's URL, without any secret.
	String() string
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Options configure Open. Zero fields take the defaults noted.
type Options struct {
	// Endpoint is the S3 server, "host:port" or "http(s)://host:port";
	// default s3.amazonaws.com. An http:// scheme turns TLS off.
	Endpoint string
	// DisableTLS talks plain HTTP to a bare host:port endpoint.
	DisableTLS bool
	// Region is sent in signatures; default us-east-1.
	Region string
	// AccessKey, SecretKey and SessionToken are static credentials; when
	// AccessKey is empty the request is anonymous.
	AccessKey, SecretKey, SessionToken string
	// PartSize is the multipart part size for uploads; default 16 MiB.
	// An upload holds at most PartThreads parts in memory at once.
	PartSize uint64
	// PartThreads is how many parts upload in parallel; default 4.
	PartThreads uint
	// StallTimeout fails a request to an S3 store whose connection moves
	// no byte for this long (a hung server, a black-holed network); the
	// request is then retried like any other failure. Without it a stalled
	// upload or restore waited for ever. Default 1 min, as long as the
	// wait for a response's headers.
	StallTimeout time.Duration
}

// OptionsFromEnv fills Options from the usual AWS variables:
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION or AWS_DEFAULT_REGION,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. getenv is
// os.Getenv in cmd/edl; the package itself never reads the environment.
func OptionsFromEnv(getenv func(string) string) Options {
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	return Options{
		Endpoint:     first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:       first("AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKey:    getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:    getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: getenv("AWS_SESSION_TOKEN"),
	}
}

// Open returns the Store for rawURL: file:///abs/dir (or file://rel/dir) or
// s3://BUCKET[/PREFIX]. An s3 URL may carry ?endpoint=, ?region= and
// ?tls=false, which override opts. Open checks that the bucket (or
// directory) exists and that the credentials are accepted; its errors name
// the URL and never a secret.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open store %q: not a URL", redact(rawURL))
	}
	if u.User != nil {
		return nil, fmt.Errorf("open store %s: credentials in the URL are not accepted; use Options or AWS_* variables", redact(rawURL))
	}
	switch u.Scheme {
	case "file":
		return openFile(u)
	case "s3":
		return openS3(ctx, u, opts)
	default:
		return nil, fmt.Errorf("open store %s: unknown scheme %q (want file:// or s3://)", redact(rawURL), u.Scheme)
	}
}

// redact drops any user info from a URL so errors can quote it.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.Index(raw, "@"); i >= 0 {
			return "<unparsable URL>"
		}
		return raw
	}
	u.User = nil
	return u.String()
}

// checkKey refuses keys that could escape a store's root or that the two
// backends would treat differently.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return fmt.Errorf("invalid object key %q", key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." || strings.HasPrefix(part, tempPrefix) {
			return fmt.Errorf("invalid object key %q", key)
		}
	}
	if strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("invalid object key %q", key)
	}
	return nil
}

// countingReader counts bytes so a Put can compare them with a known size.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
