package versitygw

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/edl-nomad/edl/checkpoint/s3ready"
	"github.com/edl-nomad/edl/internal/childproc"
	"github.com/edl-nomad/edl/internal/freeport"
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

	mu   sync.Mutex      // held across start and stop
	proc *childproc.Proc // nil while stopped
	last *childproc.Proc // the latest child, for Log
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
	port, err := freeport.Loopback()
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
	cmd := exec.Command(s.cfg.Bin, s.args...)
	cmd.Dir = s.cfg.Dir
	// A clean environment: the root identity comes from these two alone.
	cmd.Env = []string{"HOME=" + s.cfg.Dir, "PATH=/usr/bin:/bin", "TMPDIR=" + s.cfg.Dir,
		"ROOT_ACCESS_KEY=" + s.cfg.AccessKey, "ROOT_SECRET_KEY=" + s.cfg.SecretKey}
	p, err := childproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("versitygw: start %s: %w", s.cfg.Bin, err)
	}
	s.proc, s.last = p, p
	if err := s.waitReady(ctx); err != nil {
		s.killLocked()
		return fmt.Errorf("versitygw on %s: %w; its output: %s", s.Endpoint, err, childproc.Tail(p.Output(), 2000))
	}
	return nil
}

// waitReady polls until a probe object round-trips, or the child exits.
func (s *Server) waitReady(ctx context.Context) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	return s3ready.WaitChild(ctx, s.proc, c, 50*time.Millisecond, s.cfg.StartTimeout)
}

// Client returns a minio client for the server with its credentials.
func (s *Server) Client() (*minio.Client, error) {
	return s3ready.Client(s.Endpoint, s.cfg.AccessKey, s.cfg.SecretKey)
}

// Log is what the child printed since it was last started.
func (s *Server) Log() string {
	s.mu.Lock()
	p := s.last
	s.mu.Unlock()
	if p == nil {
		return ""
	}
	return p.Output()
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 5 s).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.Stop(5 * time.Second)
	s.proc = nil
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
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	s.proc = nil
}
