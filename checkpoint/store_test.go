package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/edl-nomad/edl/checkpoint"
	"github.com/edl-nomad/edl/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// backend opens a fresh, empty store of one kind.
type backend struct {
	name string
	open func(t *testing.T) checkpoint.Store
}

func backends() []backend {
	return []backend{
		{"file", func(t *testing.T) checkpoint.Store {
			s, err := checkpoint.Open(context.Background(), "file://"+t.TempDir()+"/store", checkpoint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"s3", func(t *testing.T) checkpoint.Store {
			return openS3(t, testenv.NewS3(t))
		}},
	}
}

func s3Options(s *testenv.S3) checkpoint.Options {
	return checkpoint.Options{Endpoint: s.EndpointURL(), Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey,
		PartSize: 5 << 20}
}

func openS3(t *testing.T, s *testenv.S3) checkpoint.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := checkpoint.Open(ctx, s.URL(), s3Options(s))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// randomBytes is deterministic per seed, so failures reproduce.
func randomBytes(n int, seed uint64) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// plainReader hides bytes.Reader's ReaderAt and WriterTo, as a network
// stream would.
type plainReader struct{ r io.Reader }

func (p plainReader) Read(b []byte) (int, error) { return p.r.Read(b) }

func getAll(t *testing.T, s checkpoint.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

func TestStoreContract(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Run("round trips keep every byte", func(t *testing.T) { testRoundTrips(t, be.open(t)) })
			t.Run("missing keys", func(t *testing.T) { testMissing(t, be.open(t)) })
			t.Run("list by prefix and delete", func(t *testing.T) { testListDelete(t, be.open(t)) })
			t.Run("short body keeps the old object", func(t *testing.T) { testShortBody(t, be.open(t)) })
			t.Run("bad keys and cancelled context", func(t *testing.T) { testBadInput(t, be.open(t)) })
		})
	}
}

func testRoundTrips(t *testing.T, s checkpoint.Store) {
	ctx := context.Background()
	cases := []struct {
		name      string
		size      int
		knownSize bool
		plain     bool // hide ReaderAt: streamed parts
	}{
		{"empty", 0, true, false},
		{"one byte", 1, true, true},
		{"1 MiB + 3, unknown size", 1<<20 + 3, false, true},
		// Parts are 5 MiB in these tests (s3Options).
		{"12 MiB multipart from memory", 12 << 20, true, false},
		{"12 MiB multipart streamed, unknown size", 12<<20 + 1, false, true},
		{"11 MiB multipart streamed, known size", 11 << 20, true, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := randomBytes(c.size, uint64(i))
			var r io.Reader = bytes.NewReader(data)
			if c.plain {
				r = plainReader{r}
			}
			size := int64(-1)
			if c.knownSize {
				size = int64(c.size)
			}
			key := "rt/" + strings.ReplaceAll(c.name, " ", "_")
			if err := s.Put(ctx, key, r, size); err != nil {
				t.Fatalf("put: %v", err)
			}
			got := getAll(t, s, key)
			if sha256.Sum256(got) != sha256.Sum256(data) || len(got) != len(data) {
				t.Fatalf("read back %d bytes with another checksum, wrote %d", len(got), len(data))
			}
			st, err := s.Stat(ctx, key)
			if err != nil || st.Size != int64(c.size) || st.Key != key {
				t.Fatalf("stat = %+v, %v; want key %s size %d", st, err, key, c.size)
			}
		})
	}
	// Overwrite replaces the whole object.
	if err := s.Put(ctx, "rt/over", strings.NewReader("first version, long"), -1); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "rt/over", strings.NewReader("second"), 6); err != nil {
		t.Fatal(err)
	}
	if got := string(getAll(t, s, "rt/over")); got != "second" {
		t.Fatalf("after overwrite got %q, want %q", got, "second")
	}
}

func testMissing(t *testing.T, s checkpoint.Store) {
	ctx := context.Background()
	if _, err := s.Get(ctx, "no/such"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Get missing: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "no/such"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Stat missing: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "no/such"); err != nil {
		t.Errorf("Delete missing: %v, want nil", err)
	}
	got, err := s.List(ctx, "no/")
	if err != nil || len(got) != 0 {
		t.Errorf("List empty prefix = %v, %v; want nothing", got, err)
	}
}

func testListDelete(t *testing.T, s checkpoint.Store) {
	ctx := context.Background()
	keys := []string{"a/b/1", "a/b/2", "a/c", "ab/x", "z"}
	for _, k := range keys {
		if err := s.Put(ctx, k, strings.NewReader(k), int64(len(k))); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		prefix string
		want   []string
	}{
		{"a/b/", []string{"a/b/1", "a/b/2"}},
		{"a/b/1", []string{"a/b/1"}},
		{"a", []string{"a/b/1", "a/b/2", "a/c", "ab/x"}},
		{"", keys},
		{"q", nil},
	}
	for _, c := range cases {
		got, err := s.List(ctx, c.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", c.prefix, err)
		}
		var names []string
		for _, o := range got {
			names = append(names, o.Key)
			if o.Size != int64(len(o.Key)) || o.Modified.IsZero() {
				t.Errorf("List(%q): %+v, want size %d and a modification time", c.prefix, o, len(o.Key))
			}
		}
		if strings.Join(names, ",") != strings.Join(c.want, ",") {
			t.Errorf("List(%q) = %v, want %v", c.prefix, names, c.want)
		}
	}
	if err := s.Delete(ctx, "a/b/1"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.List(ctx, "a/b/")
	if len(got) != 1 || got[0].Key != "a/b/2" {
		t.Errorf("after delete List(a/b/) = %v, want [a/b/2]", got)
	}
}

// failingReader yields n bytes and then an error, as a dying source would.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("source died")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

func testShortBody(t *testing.T, s checkpoint.Store) {
	ctx := context.Background()
	if err := s.Put(ctx, "k", strings.NewReader("old"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", strings.NewReader("new but short"), 100); err == nil {
		t.Errorf("a body shorter than its size was accepted")
	}
	if err := s.Put(ctx, "k", &failingReader{n: 12 << 20}, -1); err == nil {
		t.Errorf("a body that failed mid-stream was accepted")
	}
	if got := string(getAll(t, s, "k")); got != "old" {
		t.Errorf("after failed puts got %q, want the old object %q", got, "old")
	}
}

func testBadInput(t *testing.T, s checkpoint.Store) {
	ctx := context.Background()
	for _, k := range []string{"", "/abs", "a/../b", "a//b", "dir/", ".", "a/.edl-tmp-x"} {
		if err := s.Put(ctx, k, strings.NewReader("x"), 1); err == nil {
			t.Errorf("Put(%q) accepted a bad key", k)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(cctx, "cancelled", plainReader{bytes.NewReader(make([]byte, 1<<20))}, -1); err == nil {
		t.Errorf("Put with a cancelled context succeeded")
	}
	if _, err := s.Stat(ctx, "cancelled"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("cancelled Put left an object (stat err %v)", err)
	}
}
