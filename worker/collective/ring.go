package collective

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// DefaultTimeout is RingConfig.Timeout when it is zero.
const DefaultTimeout = 10 * time.Second

// RingConfig describes this member's place in one generation's ring.
type RingConfig struct {
	Generation int64
	Rank       int
	// Peers holds the address of every rank in rank order; Peers[Rank] is
	// this Transport's Addr as the others reach it.
	Peers []string
	// Timeout bounds every wait on a neighbour: building the ring, and any
	// stretch of an operation without progress. It must exceed the largest
	// gap between members entering the same operation. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// ChunkBytes is the size of the pieces AllReduce pipelines, in floats
	// times 4; zero means DefaultChunkBytes.
	ChunkBytes int
	// Compression puts AllReduce values on the wire as fp16 when
	// CompressionFP16; every member must use the same (checked).
	Compression Compression
}

// Validate checks the fields, naming the one at fault.
func (c RingConfig) Validate() error {
	switch {
	case c.Generation < 0:
		return fmt.Errorf("collective: RingConfig.Generation must be >= 0, got %d", c.Generation)
	case len(c.Peers) == 0:
		return errors.New("collective: RingConfig.Peers is empty")
	case c.Rank < 0 || c.Rank >= len(c.Peers):
		return fmt.Errorf("collective: RingConfig.Rank %d out of range [0,%d)", c.Rank, len(c.Peers))
	case c.Timeout < 0:
		return fmt.Errorf("collective: RingConfig.Timeout must be >= 0, got %s", c.Timeout)
	case c.ChunkBytes < 0:
		return fmt.Errorf("collective: RingConfig.ChunkBytes must be >= 0, got %d", c.ChunkBytes)
	case c.Compression > CompressionFP16:
		return fmt.Errorf("collective: RingConfig.Compression: unknown %s", c.Compression)
	}
	return nil
}

// Ring is one generation's ring: a link to the successor (written) and one
// from the predecessor (read). Operations are collective: every member calls
// the same ones in the same order; a Ring runs one operation at a time.
type Ring struct {
	gen         int64
	rank        int
	world       int
	timeout     time.Duration
	chunk       int // floats per AllReduce piece
	compression Compression
	log         *slog.Logger

	next net.Conn // to rank+1
	prev net.Conn // from rank-1

	op   sync.Mutex // one operation at a time
	seq  uint64
	hdrW [hdrLen]byte
	hdrR [hdrLen]byte

	failOnce sync.Once
	dead     chan struct{} // closed by fail
	err      error         // set before dead is closed

	// AllReduce: the caller's goroutine receives, sender() sends.
	progress atomic.Int64  // pieces received and reduced in the current operation
	wake     chan struct{} // cap 1: progress moved
	sent     atomic.Int64  // pieces sent in the current operation
	sentWake chan struct{} // cap 1: sent moved
	sendReq  chan *plan
	sendDone chan error
	scratch  []float32 // receiver's piece, float32 on the wire
	recvHalf []uint16  // receiver's piece, fp16 on the wire
	sendHalf []uint16  // sender's piece, fp16 on the wire
	plan     plan
}

// NewRing builds this member's ring of cfg.Generation: it dials the successor
// and waits for the predecessor, each side checking the other's handshake.
// It waits at most cfg.Timeout. It fails with ErrStaleGeneration if the
// Transport already built this or a newer generation, with ErrRefused if the
// successor refused (and ErrStaleGeneration too if the successor is already
// at a newer generation), and with the context's error when it ends first.
func (t *Transport) NewRing(ctx context.Context, cfg RingConfig) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = DefaultChunkBytes
	}
	world := len(cfg.Peers)
	r := &Ring{
		gen:         cfg.Generation,
		rank:        cfg.Rank,
		world:       world,
		timeout:     cfg.Timeout,
		chunk:       max(cfg.ChunkBytes/4, 1),
		compression: cfg.Compression,
		log:         t.log.With("generation", cfg.Generation, "rank", cfg.Rank),
		dead:        make(chan struct{}),
		wake:        make(chan struct{}, 1),

		sentWake: make(chan struct{}, 1),
	}
	slot, err := t.register(cfg.Generation, cfg.Rank, world)
	if err != nil {
		return nil, fmt.Errorf("collective: new ring: %w", err)
	}
	if world == 1 {
		return r, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	succ := (cfg.Rank + 1) % world
	type dialed struct {
		c   net.Conn
		err error
	}
	dch := make(chan dialed, 1)
	go func() {
		c, err := t.dial(ctx, cfg.Peers[succ], hello{job: t.job, gen: cfg.Generation, from: cfg.Rank, to: succ, world: world})
		dch <- dialed{c, err}
	}()

	var (
		prev net.Conn
		next *dialed
	)
	for err == nil && (prev == nil || next == nil) {
		select {
		case prev = <-slot.conn:
		case d := <-dch:
			next = &d
			if d.err != nil {
				err = fmt.Errorf("dial rank %d at %s: %w", succ, cfg.Peers[succ], d.err)
			}
		case <-slot.stale:
			err = fmt.Errorf("%w: generation %d replaced by a newer one while connecting", ErrStaleGeneration, cfg.Generation)
		case <-t.done:
			err = ErrClosed
		case <-ctx.Done():
			err = fmt.Errorf("waiting for rank %d: %w", (cfg.Rank+world-1)%world, context.Cause(ctx))
		}
	}
	if err != nil {
		t.unregister(slot)
		cancel()
		if prev != nil {
			_ = prev.Close()
		}
		if next == nil {
			d := <-dch
			next = &d
		}
		if next.c != nil {
			_ = next.c.Close()
		}
		return nil, fmt.Errorf("collective: new ring generation %d rank %d: %w", cfg.Generation, cfg.Rank, err)
	}
	d := *next
	r.next, r.prev = d.c, prev
	r.sendReq = make(chan *plan)
	r.sendDone = make(chan error, 1)
	go r.sender()
	r.log.Debug("ring connected", "world", world)
	return r, nil
}

// dial connects to addr and performs the handshake, retrying while the
// listener is not up yet.
func (t *Transport) dial(ctx context.Context, addr string, h hello) (net.Conn, error) {
	msg, err := h.encode()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	var refused error
	c, err := backoff.Retry(ctx, func() (net.Conn, error) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, backoff.Permanent(err)
		}
		refused = err
		return c, err
	}, backoff.WithBackOff(backoff.NewConstantBackOff(20*time.Millisecond)), backoff.WithMaxElapsedTime(0))
	if err != nil {
		if refused != nil && !errors.Is(err, refused) {
			err = fmt.Errorf("%w (last: %w)", err, refused)
		}
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	st, newest, err := func() (status, int64, error) {
		if _, err := c.Write(msg); err != nil {
			return 0, 0, err
		}
		return readReply(c)
	}()
	if !stop() {
		err = errors.Join(err, context.Cause(ctx))
	}
	switch {
	case err != nil:
	case st == statusStale:
		err = fmt.Errorf("%w: %w: peer is at generation %d", ErrRefused, ErrStaleGeneration, newest)
	case st != statusOK:
		err = fmt.Errorf("%w: %s (their newest generation %d)", ErrRefused, st, newest)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	tuneConn(c)
	return c, nil
}

// Size is the number of members.
func (r *Ring) Size() int { return r.world }

// Rank is this member's rank.
func (r *Ring) Rank() int { return r.rank }

// Generation is the generation the ring was built for.
func (r *Ring) Generation() int64 { return r.gen }

// Close releases the links; an operation in progress returns ErrClosed and
// the neighbours see a PeerError.
func (r *Ring) Close() error {
	r.fail(ErrClosed)
	return nil
}

// fail records the ring's first error and closes its links, which unblocks
// every read and write and tells the neighbours at once.
func (r *Ring) fail(err error) {
	r.failOnce.Do(func() {
		r.err = err
		close(r.dead)
		if r.next != nil {
			_ = r.next.Close()
			_ = r.prev.Close()
		}
		if !errors.Is(err, ErrClosed) {
			r.log.Debug("ring failed", "err", err) // the caller gets err; this is for tracing
		}
	})
}

// failed returns the ring's error once it has failed.
func (r *Ring) failed() error {
	select {
	case <-r.dead:
		return r.err
	default:
		return nil
	}
}

// peerErr wraps an I/O error on the link to rank.
func (r *Ring) peerErr(op string, rank int, err error) error {
	if errors.Is(err, ErrClosed) || errors.As(err, new(*PeerError)) {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("no progress within %s: %w", r.timeout, err)
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("link closed: %w", err)
	}
	return &PeerError{Rank: rank, Generation: r.gen, Op: op, Err: err}
}

func (r *Ring) succ() int { return (r.rank + 1) % r.world }
func (r *Ring) pred() int { return (r.rank + r.world - 1) % r.world }

// begin starts an operation: it takes the ring, arms ctx and returns the
// function that ends it. An error means the ring cannot run it.
func (r *Ring) begin(ctx context.Context) (func(), error) {
	r.op.Lock()
	if err := r.failed(); err != nil {
		r.op.Unlock()
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		r.op.Unlock()
		return nil, err
	}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { r.fail(fmt.Errorf("collective: operation abandoned: %w", context.Cause(ctx))) })
	}
	r.seq++
	return func() { stop(); r.op.Unlock() }, nil
}

// result is what an operation returns: the ring's first error if it failed
// (the root cause, not a closed-link error that followed), else err.
func (r *Ring) result(err error) error {
	if ferr := r.failed(); ferr != nil {
		return ferr
	}
	if err != nil {
		r.fail(err)
		return r.failed()
	}
	return nil
}
