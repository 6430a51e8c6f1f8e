package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// handshakeTimeout bounds how long an inbound connection may take to send
// its hello, and how long a hello for a generation not built here yet waits
// for it.
const handshakeTimeout = 10 * time.Second

// socketBuffer is the SO_SNDBUF/SO_RCVBUF asked for on every ring link; the
// kernel caps it at net.core.[rw]mem_max.
const socketBuffer = 4 << 20

// Transport is one worker's listener for its whole life; the rings of
// successive generations are built on it with NewRing.
type Transport struct {
	ln   net.Listener
	job  string
	log  *slog.Logger
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	newest  int64         // newest generation a ring was requested for; -1 before any
	slot    *acceptSlot   // the ring of generation newest, waiting for its predecessor
	changed chan struct{} // closed and replaced whenever newest or slot changes
	conns   map[net.Conn]struct{}
}

// acceptSlot is a ring under construction waiting for its predecessor's link.
type acceptSlot struct {
	gen   int64
	rank  int
	world int
	conn  chan net.Conn // buffered 1
	stale chan struct{} // closed when a newer generation replaces this one
}

// Listen opens the worker's listener on addr (e.g. "127.0.0.1:0") for job.
func Listen(addr string, job string, logger *slog.Logger) (*Transport, error) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return nil, errors.New("collective: big-endian hosts are not supported")
	}
	if job == "" || len(job) > maxJobLen {
		return nil, fmt.Errorf("collective: job name must have 1..%d bytes", maxJobLen)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("collective: listen %s: %w", addr, err)
	}
	t := &Transport{
		ln:      ln,
		job:     job,
		log:     logger.With("component", "collective", "job", job),
		done:    make(chan struct{}),
		newest:  -1,
		changed: make(chan struct{}),
		conns:   map[net.Conn]struct{}{},
	}
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
}

// Addr is the host:port that peers dial.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// Close stops accepting and drops connections still in their handshake.
// Rings already built keep their links until they are closed themselves.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.done)
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	err := t.ln.Close()
	t.wg.Wait()
	return err
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.log.Warn("accept failed", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.mu.Unlock()
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.handleInbound(c)
		}()
	}
}

// handleInbound reads a hello and either hands the connection to the ring
// waiting for it, parks it until the ring of its generation is requested, or
// refuses it with a reason.
func (t *Transport) handleInbound(c net.Conn) {
	keep := false
	defer func() {
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		if !keep {
			_ = c.Close()
		}
	}()
	deadline := time.Now().Add(handshakeTimeout)
	_ = c.SetReadDeadline(deadline)
	h, err := readHello(c)
	if err != nil {
		t.log.Debug("bad handshake", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	for {
		t.mu.Lock()
		st, slot, wait := t.judge(h)
		newest := t.newest
		if slot != nil {
			t.slot = nil
			t.notifyLocked()
		}
		t.mu.Unlock()
		if wait != nil {
			timer := time.NewTimer(time.Until(deadline))
			select {
			case <-wait:
				timer.Stop()
				continue
			case <-timer.C:
				st = statusTimeout
			case <-t.done:
				timer.Stop()
				st = statusClosing
			}
		}
		_ = c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		_, werr := c.Write(encodeReply(st, newest))
		if st != statusOK {
			t.log.Info("refused ring connection", "remote", c.RemoteAddr().String(),
				"their_job", h.job, "their_generation", h.gen, "from_rank", h.from,
				"newest_generation", newest, "reason", st.String())
			return
		}
		if werr != nil {
			t.log.Debug("handshake reply failed", "err", werr)
		}
		_ = c.SetDeadline(time.Time{})
		tuneConn(c)
		keep = true
		slot.conn <- c // buffered; a broken link shows up at the first operation
		return
	}
}

// judge decides on a hello under t.mu: accept into a slot, refuse with a
// status, or wait (non-nil channel) for the generation to be requested.
func (t *Transport) judge(h hello) (status, *acceptSlot, chan struct{}) {
	switch {
	case t.closed:
		return statusClosing, nil, nil
	case h.job != t.job:
		return statusWrongJob, nil, nil
	case h.gen < t.newest:
		return statusStale, nil, nil
	case h.gen > t.newest:
		return 0, nil, t.changed
	case t.slot == nil || t.slot.gen != h.gen:
		return statusDuplicate, nil, nil
	case h.world != t.slot.world || h.to != t.slot.rank || h.from != (t.slot.rank+t.slot.world-1)%t.slot.world:
		return statusBadRank, nil, nil
	}
	return statusOK, t.slot, nil
}

func (t *Transport) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// register makes gen the newest generation and, for a ring of more than one
// member, opens the slot its predecessor's link will be handed to.
func (t *Transport) register(gen int64, rank, world int) (*acceptSlot, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if gen <= t.newest {
		return nil, fmt.Errorf("%w: generation %d, newest on this transport is %d", ErrStaleGeneration, gen, t.newest)
	}
	if t.slot != nil {
		close(t.slot.stale)
		t.slot = nil
	}
	t.newest = gen
	var s *acceptSlot
	if world > 1 {
		s = &acceptSlot{gen: gen, rank: rank, world: world, conn: make(chan net.Conn, 1), stale: make(chan struct{})}
		t.slot = s
	}
	t.notifyLocked()
	return s, nil
}

// unregister drops s if it is still waiting, and closes a link handed to it
// too late.
func (t *Transport) unregister(s *acceptSlot) {
	t.mu.Lock()
	if t.slot == s {
		t.slot = nil
		t.notifyLocked()
	}
	t.mu.Unlock()
	select {
	case c := <-s.conn:
		_ = c.Close()
	default:
	}
}

// tuneConn sets the options every ring link gets.
func tuneConn(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	_ = tc.SetNoDelay(true)
	_ = tc.SetReadBuffer(socketBuffer)
	_ = tc.SetWriteBuffer(socketBuffer)
}
