package s3ready

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/edl-nomad/edl/internal/childproc"
	"github.com/minio/minio-go/v7"
)

// ChildConfig is one S3 server's command line, as its package builds it.
type ChildConfig struct {
	Name     string // what errors call it ("weed mini")
	Bin, Dir string // absolute; the child runs in Dir
	Args     []string
	// Env is the child's whole environment: nothing of this process's
	// leaks in (AWS_* variables would add identities to some servers).
	Env                  []string
	Endpoint             string // host:port the server's S3 API listens on
	AccessKey, SecretKey string
	// Poll is the interval of the readiness probe; StartTimeout bounds the
	// wait for it.
	Poll, StartTimeout time.Duration
	// WaitPortFree: once the child has ended, wait up to 5 s until
	// Endpoint's port is free, for servers whose helper processes hold
	// their ports a moment longer than the child lives.
	WaitPortFree bool
}

// PrepareDirs makes a child's bin and dir absolute (the child runs in
// dir) and creates each of subdirs under dir (dir itself when none); name
// (the server's package) prefixes the errors.
func PrepareDirs(name, bin, dir string, subdirs ...string) (absBin, absDir string, err error) {
	if absBin, err = filepath.Abs(bin); err != nil {
		return "", "", fmt.Errorf("%s: %w", name, err)
	}
	if absDir, err = filepath.Abs(dir); err != nil {
		return "", "", fmt.Errorf("%s: %w", name, err)
	}
	if len(subdirs) == 0 {
		subdirs = []string{""}
	}
	for _, d := range subdirs {
		if err := os.MkdirAll(filepath.Join(absDir, d), 0o755); err != nil {
			return "", "", fmt.Errorf("%s: %w", name, err)
		}
	}
	return absBin, absDir, nil
}

// Child is an S3 server running (or stopped) as a child process of this
// one: it starts it, waits until it stores an object, stops, kills and
// restarts it on the same port and data. It dies with this process
// (Pdeathsig).
type Child struct {
	Endpoint string // host:port, plain HTTP
	cfg      ChildConfig

	mu   sync.Mutex      // held across start and stop
	proc *childproc.Proc // nil while stopped
	last *childproc.Proc // the latest child, for Log
}

// StartChild launches the server and returns once it stores and reads
// back an object.
func StartChild(ctx context.Context, cfg ChildConfig) (*Child, error) {
	if cfg.Name == "" || cfg.Bin == "" || cfg.Endpoint == "" || cfg.Poll <= 0 || cfg.StartTimeout <= 0 {
		return nil, errors.New("s3ready: a child needs Name, Bin, Endpoint, Poll and StartTimeout")
	}
	c := &Child{Endpoint: cfg.Endpoint, cfg: cfg}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Child) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd := exec.Command(c.cfg.Bin, c.cfg.Args...)
	cmd.Dir = c.cfg.Dir
	cmd.Env = c.cfg.Env
	p, err := childproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("%s: start %s: %w", c.cfg.Name, c.cfg.Bin, err)
	}
	c.proc, c.last = p, p
	cl, err := c.Client()
	if err == nil {
		err = WaitChild(ctx, p, cl, c.cfg.Poll, c.cfg.StartTimeout)
	}
	if err != nil {
		c.killLocked()
		return fmt.Errorf("%s on %s: %w; its output: %s", c.cfg.Name, c.Endpoint, err, childproc.Tail(p.Output(), 2000))
	}
	return nil
}

// Client returns a minio client for the server with its credentials.
func (c *Child) Client() (*minio.Client, error) {
	return Client(c.Endpoint, c.cfg.AccessKey, c.cfg.SecretKey)
}

// Log is what the child printed since it was last started.
func (c *Child) Log() string {
	c.mu.Lock()
	p := c.last
	c.mu.Unlock()
	if p == nil {
		return ""
	}
	return p.Output()
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 5 s).
func (c *Child) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return
	}
	c.proc.Stop(5 * time.Second)
	c.ended()
}

// Kill stops the server at once with SIGKILL, as a crash would.
func (c *Child) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killLocked()
}

// Pause stops the server with SIGSTOP, as a hung host or a black-holed
// network would look: its kernel still accepts connections and buffers
// bytes, but nothing answers. Resume undoes it; Stop and Kill work on a
// paused server.
func (c *Child) Pause() { c.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (c *Child) Resume() { c.signal(syscall.SIGCONT) }

func (c *Child) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		_ = syscall.Kill(c.proc.Pid(), sig)
	}
}

// Restart starts a stopped or killed server again on the same port and
// data and waits until it is ready.
func (c *Child) Restart(ctx context.Context) error {
	c.Stop()
	return c.start(ctx)
}

func (c *Child) killLocked() {
	if c.proc == nil {
		return
	}
	c.proc.Kill()
	c.ended()
}

// ended forgets the child that has just ended, once its port is free if
// the server asked for that.
func (c *Child) ended() {
	c.proc = nil
	if !c.cfg.WaitPortFree {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", c.Endpoint, 100*time.Millisecond)
		if err != nil {
			return
		}
		conn.Close()
		time.Sleep(20 * time.Millisecond)
	}
}
