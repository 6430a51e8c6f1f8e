package versitygw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/edl-nomad/edl/checkpoint/s3ready"
	"github.com/minio/minio-go/v7"
)

// Config says where the binary is and where its data lives.
type Config struct {
	Bin string // path to versitygw; see LookBinary
	Dir string // data directory; kept across Restart
	// AccessKey and SecretKey form the root identity, the only one the
	// gateway accepts; anonymous requests are refused.
	AccessKey, SecretKey string
	// StartTimeout bounds the wait until an object can be stored; default 60 s.
	StartTimeout time.Duration
}

// Validate says which field is wrong.
func (c Config) Validate() error {
	switch {
	case c.Bin == "":
		return errors.New("versitygw: Bin is required")
	case c.Dir == "":
		return errors.New("versitygw: Dir is required")
	case c.AccessKey == "" || c.SecretKey == "":
		return errors.New("versitygw: AccessKey and SecretKey are required")
	case c.StartTimeout < 0:
		return fmt.Errorf("versitygw: StartTimeout %s is negative", c.StartTimeout)
	}
	return nil
}

// Server is a running (or stopped) gateway.
type Server struct {
	Endpoint string // host:port, plain HTTP
	cfg      Config
	args     []string

	mu   sync.Mutex // held across start and stop
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  *lockedBuffer
}

// Start launches the gateway and returns once it stores and reads back an
// object. The child dies with this process (Pdeathsig).
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var err error
	if cfg.Bin, err = filepath.Abs(cfg.Bin); err != nil { // the child runs in Dir
		return nil, fmt.Errorf("versitygw: %w", err)
	}
	if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
		return nil, fmt.Errorf("versitygw: %w", err)
	}
	data, meta := filepath.Join(cfg.Dir, "data"), filepath.Join(cfg.Dir, "meta")
	for _, d := range []string{data, meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("versitygw: %w", err)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("versitygw: %w", err)
	}
	s := &Server{Endpoint: "127.0.0.1:" + strconv.Itoa(port), cfg: cfg}
	s.args = []string{
		"--port", s.Endpoint, "--region", "us-east-1", "--quiet",
		"posix", "--sidecar", meta, data,
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = &lockedBuffer{}
	cmd := exec.Command(s.cfg.Bin, s.args...)
	cmd.Dir = s.cfg.Dir
	// A clean environment: the root identity comes from these two alone.
	cmd.Env = []string{"HOME=" + s.cfg.Dir, "PATH=/usr/bin:/bin", "TMPDIR=" + s.cfg.Dir,
		"ROOT_ACCESS_KEY=" + s.cfg.AccessKey, "ROOT_SECRET_KEY=" + s.cfg.SecretKey}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("versitygw: start %s: %w", s.cfg.Bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	if err := s.waitReady(ctx, done); err != nil {
		s.killLocked()
		return fmt.Errorf("versitygw on %s: %w; its output: %s", s.Endpoint, err, tail(s.log.String(), 2000))
	}
	return nil
}

// waitReady polls until a probe object round-trips, or the child exits.
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	c, err := s.Client()
	if err != nil {
		return err
	}
	var last error
	_, err = backoff.Retry(ctx, func() (struct{}, error) {
		last = s3ready.Probe(ctx, c, "edl-ready-probe")
		select {
		case <-exited:
			if last != nil {
				return struct{}{}, backoff.Permanent(errExited)
			}
		default:
		}
		return struct{}{}, last
	}, backoff.WithBackOff(backoff.NewConstantBackOff(50*time.Millisecond)), backoff.WithMaxElapsedTime(0))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errExited):
		return fmt.Errorf("exited during start (last probe: %v)", last)
	}
	return fmt.Errorf("not ready after %s: %v", s.cfg.StartTimeout, last)
}

var errExited = errors.New("exited during start")

// Client returns a minio client for the server with its credentials.
func (s *Server) Client() (*minio.Client, error) {
	return s3ready.Client(s.Endpoint, s.cfg.AccessKey, s.cfg.SecretKey)
}

// Log is what the child printed since it was last started.
func (s *Server) Log() string {
	s.mu.Lock()
	l := s.log
	s.mu.Unlock()
	if l == nil {
		return ""
	}
	return l.String()
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 5 s).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	s.killLocked()
}

// Kill stops the server at once with SIGKILL, as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

// Restart starts a stopped or killed server again on the same port and
// data and waits until it is ready.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	return s.start(ctx)
}

func (s *Server) killLocked() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd, s.done = nil, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// lockedBuffer collects the child's output; the child's copy goroutines
// write it while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
