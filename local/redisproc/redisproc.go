package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/edl-nomad/edl/internal/childproc"
	"github.com/edl-nomad/edl/internal/freeport"
	"github.com/redis/go-redis/v9"
)

// Proc is a running redis-server child.
type Proc struct {
	addr     string
	password string
	child    *childproc.Proc
	once     sync.Once
}

// output is what the child has printed so far.
func (p *Proc) output() string { return p.child.Output() }

// Options tune the child; the zero value is fine.
type Options struct {
	// Binary is the redis-server to run; default: PATH, then /usr/bin/redis-server.
	Binary string
	// Port to listen on; 0 picks a free one.
	Port int
	// AppendFsync is "always", "everysec" (default) or "no".
	AppendFsync string
	// Password, when set, is the default user's (requirepass): it goes in
	// a mode-0600 config file in the data dir, never on the command line
	// (which every process on the machine may read).
	Password string
}

// Start runs redis-server with its data (AOF) in dir, waits until it answers
// PING, and returns it. The child is in its own process group and is killed
// if this process dies (Pdeathsig), so Ctrl-C never leaves it behind.
func Start(ctx context.Context, dir string, opts Options) (*Proc, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			bin = "/usr/bin/redis-server"
			if _, serr := os.Stat(bin); serr != nil {
				return nil, fmt.Errorf("redis-server not found on PATH or at /usr/bin/redis-server: install Debian's redis-server (make setup)")
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redis data dir %s: %w", dir, err)
	}
	port := opts.Port
	if port == 0 {
		var err error
		if port, err = freeport.Loopback(); err != nil {
			return nil, err
		}
	}
	fsync := opts.AppendFsync
	if fsync == "" {
		fsync = "everysec"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	p := &Proc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	var args []string
	if opts.Password != "" {
		conf := filepath.Join(abs, "auth.conf")
		if err := os.WriteFile(conf, []byte("requirepass \""+opts.Password+"\"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("redis auth config: %w", err)
		}
		if err := os.Chmod(conf, 0o600); err != nil {
			return nil, fmt.Errorf("redis auth config: %w", err)
		}
		args = append(args, conf) // a config file must come first
	}
	p.password = opts.Password
	cmd := exec.Command(bin, append(args,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", abs,
		"--appendonly", "yes", "--appendfsync", fsync, "--save", "",
		"--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning")...)
	if p.child, err = childproc.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	if err := p.waitReady(ctx, 10*time.Second); err != nil {
		p.Stop()
		return nil, fmt.Errorf("redis-server on %s: %w; its output: %s", p.addr, err, p.output())
	}
	return p, nil
}

func (p *Proc) waitReady(ctx context.Context, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: p.addr, Password: p.password, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	err := p.child.WaitReady(ctx, 15*time.Millisecond, timeout, func() error { return c.Ping(ctx).Err() })
	switch {
	case errors.Is(err, childproc.ErrExited):
		return errExited
	case err != nil && ctx.Err() == nil:
		return fmt.Errorf("no PING answer after %s: %w", timeout, err)
	}
	return err
}

var errExited = errors.New("exited before answering PING")

// Addr is host:port.
func (p *Proc) Addr() string { return p.addr }

// URL is the redis:// URL.
func (p *Proc) URL() string { return "redis://" + p.addr }

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.child.Pid() }

// Done is closed when the child has exited.
func (p *Proc) Done() <-chan struct{} { return p.child.Done() }

// Kill stops the server at once with SIGKILL, losing what is not yet in
// its append-only file.
func (p *Proc) Kill() { p.once.Do(p.child.Kill) }

// Stop asks the server to shut down (SIGTERM) and kills it after 5 s.
func (p *Proc) Stop() { p.once.Do(func() { p.child.Stop(5 * time.Second) }) }
