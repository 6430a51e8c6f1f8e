package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/edl-nomad/edl/internal/freeport"
)

// Unavailable fails the test under CI=true and skips it elsewhere, with why.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("required test server unavailable (CI=true): %s", msg)
	}
	t.Skipf("test server unavailable: %s (run 'make setup')", msg)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) { return freeport.Loopback() }

// RandomID returns n random bytes as hex, for prefixes and bucket names.
func RandomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// slug turns a test name into something usable in keys and bucket names.
func slug(name string, max int) string {
	s := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > max {
		s = s[:max]
	}
	return strings.Trim(s, "-")
}

// RepoRoot is the folder holding go.mod, found upwards from the working dir.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// lookBinary finds a server binary: an explicit env override, then the repo's
// tool cache (.tools/bin), then PATH, then the given fallbacks.
func lookBinary(envVar, name string, fallbacks ...string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		return p, nil
	}
	if root, err := RepoRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, p := range fallbacks {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (set %s, or run 'make setup')", name, envVar)
}

// shared holds servers started once per test binary; they are stopped by
// Main, and in any case die with the test process (Pdeathsig).
var shared struct {
	mu    sync.Mutex
	stops []func()
}

func addSharedStop(f func()) {
	shared.mu.Lock()
	shared.stops = append(shared.stops, f)
	shared.mu.Unlock()
}

// sharedServer is a server started once per test binary, on first use,
// with its data in a temporary folder of its own; Main stops it and
// removes the folder.
type sharedServer[S interface{ Stop() }] struct {
	once sync.Once
	srv  S
	err  error
}

// get starts the server (start, in a new folder named after pattern) on
// first use and returns it; when it could not start, the test is
// Unavailable (what names the server).
func (sh *sharedServer[S]) get(t testing.TB, what, pattern string, start func(dir string) (S, error)) S {
	t.Helper()
	sh.once.Do(func() {
		dir, err := os.MkdirTemp("", pattern)
		if err != nil {
			sh.err = err
			return
		}
		sh.srv, sh.err = start(dir)
		if sh.err != nil {
			os.RemoveAll(dir)
			return
		}
		srv := sh.srv
		addSharedStop(func() { srv.Stop(); os.RemoveAll(dir) })
	})
	if sh.err != nil {
		Unavailable(t, "%s: %v", what, sh.err)
	}
	return sh.srv
}

// ownServer starts a server (start) for this test alone, with its data in
// the test's temporary folder, and stops it when the test ends; when it
// could not start, the test is Unavailable (what names the server).
func ownServer[S interface{ Stop() }](t testing.TB, what string, start func(dir string) (S, error)) S {
	t.Helper()
	srv, err := start(filepath.Clean(t.TempDir()))
	if err != nil {
		Unavailable(t, "%s: %v", what, err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// Main runs a package's tests and then stops the shared servers; call it
// from TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m interface{ Run() int }) {
	code := m.Run()
	shared.mu.Lock()
	for _, stop := range shared.stops {
		stop()
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// TrackSources reads every file under dirs (paths from the module's root),
// so that go test's result cache depends on their contents: a test that
// runs a Python program (python/edl, examples/torch) would otherwise be
// answered from the cache after the program changed, since the files the
// child process reads are not part of the test's inputs.
func TrackSources(t testing.TB, dirs ...string) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("track sources: %v", err)
	}
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			if e.Type().IsRegular() {
				_, err = os.ReadFile(p)
			}
			return err
		})
		if err != nil {
			t.Fatalf("track sources %s: %v", d, err)
		}
	}
}
