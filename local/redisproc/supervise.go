package redisproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/edl-nomad/edl/internal/childproc"
)

// SuperviseOptions bound how hard a Supervised server is kept up.
type SuperviseOptions struct {
	// MaxRestarts within Window; one more death fails it (default 5 per
	// minute): a server that keeps dying has a cause a restart won't fix.
	MaxRestarts int
	Window      time.Duration
	// StartTries is how many starts one restart attempts (default 4,
	// exponential backoff from 100 ms).
	StartTries uint
	// OnRestart is called after each successful restart (n counts them).
	OnRestart func(n int)
}

// Supervised is a redis-server child that is started again, on the same
// port and with the same data directory (so its append-only file brings
// back every acknowledged write), whenever it dies. When it cannot be
// brought back, Failed is closed and Err says why; the caller must then
// stop serving rather than carry on without its store.
type Supervised struct {
	dir  string
	opts Options
	sup  SuperviseOptions
	log  *slog.Logger
	addr string

	mu       sync.Mutex
	proc     *Proc
	stopping bool
	err      error
	failed   chan struct{}
	stopped  chan struct{}
}

// StartSupervised starts redis-server as Start does and keeps it running
// until Stop.
func StartSupervised(ctx context.Context, dir string, opts Options, sup SuperviseOptions, log *slog.Logger) (*Supervised, error) {
	if sup.MaxRestarts <= 0 {
		sup.MaxRestarts = 5
	}
	if sup.Window <= 0 {
		sup.Window = time.Minute
	}
	if sup.StartTries == 0 {
		sup.StartTries = 4
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := Start(ctx, dir, opts)
	if err != nil {
		return nil, err
	}
	_, ps, _ := net.SplitHostPort(p.Addr())
	opts.Port, _ = strconv.Atoi(ps) // a restart must keep the address workers were given
	s := &Supervised{dir: dir, opts: opts, sup: sup, log: log.With("component", "redis-server"), addr: p.Addr(),
		proc: p, failed: make(chan struct{}), stopped: make(chan struct{})}
	go s.watch()
	return s, nil
}

// Addr is host:port; it stays the same across restarts.
func (s *Supervised) Addr() string { return s.addr }

// URL is the redis:// URL.
func (s *Supervised) URL() string { return "redis://" + s.addr }

// Pid is the current child's process id.
func (s *Supervised) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Pid()
}

// Failed is closed when the server died and could not be restarted.
func (s *Supervised) Failed() <-chan struct{} { return s.failed }

// Err says why Failed was closed.
func (s *Supervised) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stop shuts the server down for good (SIGTERM, SIGKILL after 5 s).
func (s *Supervised) Stop() {
	s.mu.Lock()
	s.stopping = true
	p := s.proc
	s.mu.Unlock()
	p.Stop()
	<-s.stopped
}

func (s *Supervised) watch() {
	defer close(s.stopped)
	var deaths []time.Time
	for {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		<-p.Done()
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		now := time.Now()
		deaths = append(deaths, now)
		for len(deaths) > 0 && now.Sub(deaths[0]) > s.sup.Window {
			deaths = deaths[1:]
		}
		s.log.Warn("redis-server exited; restarting it on the same port and data", "addr", s.addr, "pid", p.Pid(), "output", childproc.Tail(p.output(), 500))
		if len(deaths) > s.sup.MaxRestarts {
			s.fail(fmt.Errorf("redis-server on %s died %d times within %s; its last output: %s", s.addr, len(deaths), s.sup.Window, childproc.Tail(p.output(), 500)))
			return
		}
		bo := backoff.NewExponentialBackOff()
		bo.InitialInterval = 100 * time.Millisecond
		np, err := backoff.Retry(context.Background(), func() (*Proc, error) {
			s.mu.Lock()
			stopping := s.stopping
			s.mu.Unlock()
			if stopping {
				return nil, backoff.Permanent(errStopping)
			}
			return Start(context.Background(), s.dir, s.opts)
		}, backoff.WithBackOff(bo), backoff.WithMaxTries(s.sup.StartTries))
		if errors.Is(err, errStopping) {
			return
		}
		if err != nil {
			s.fail(fmt.Errorf("redis-server on %s died and could not be restarted: %w", s.addr, err))
			return
		}
		s.mu.Lock()
		s.proc = np
		stopping = s.stopping
		s.mu.Unlock()
		if stopping { // Stop came while restarting: it stopped the old one
			np.Stop()
			return
		}
		s.log.Info("redis-server restarted", "addr", s.addr, "pid", np.Pid(), "restarts", len(deaths))
		if s.sup.OnRestart != nil {
			s.sup.OnRestart(len(deaths))
		}
	}
}

var errStopping = errors.New("redis-server is being stopped")

func (s *Supervised) fail(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	s.log.Error("redis-server is gone", "err", err)
	close(s.failed)
}
