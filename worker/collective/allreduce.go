package collective

import (
	"context"
	"fmt"
	"time"
)

// DefaultChunkBytes is the AllReduce piece size: big enough that a piece
// costs few syscalls, small enough that a received piece is still in cache
// when it is added and that sending overlaps receiving.
const DefaultChunkBytes = 256 << 10

// plan is one AllReduce: the vector is cut into world segments, each segment
// into pieces. At step s (0 <= s < 2(world-1)) rank r sends segment r-s and
// receives segment r-s-1 (mod world); the first world-1 steps reduce
// (reduce-scatter), the rest copy (all-gather). The piece sent at step s is
// the one received at step s-1, so the sender waits only for that piece.
type plan struct {
	buf    []float32
	world  int
	rank   int
	pieces int // per segment
	steps  int
	scale  float32 // applied when a segment is complete; 0: none
	half   bool    // fp16 on the wire
}

// piece returns the bounds of piece k of segment seg.
func (p *plan) piece(seg, k int) (lo, hi int) {
	n := len(p.buf)
	slo, shi := seg*n/p.world, (seg+1)*n/p.world
	sl := shi - slo
	return slo + k*sl/p.pieces, slo + (k+1)*sl/p.pieces
}

func (p *plan) seg(s int) int { return ((p.rank-s)%p.world + p.world) % p.world }

// AllReduce replaces buf, on every member, with the element-wise sum of all
// members' buf. All members pass the same length (any, including 0).
func (r *Ring) AllReduce(ctx context.Context, buf []float32) error {
	return r.allReduce(ctx, "allreduce", opAllReduce, buf, 0, false)
}

// AllReduceMean is AllReduce divided by the number of members.
func (r *Ring) AllReduceMean(ctx context.Context, buf []float32) error {
	return r.allReduce(ctx, "allreduce-mean", opAllReduceMean, buf, 0, true)
}

// MaxExactTail bounds AllReduceExactTail's exact part.
const MaxExactTail = 1 << 24

// AllReduceExactTail is AllReduce whose last exact values always travel as
// float32, whatever the ring's Compression: with fp16 on the wire an
// integer above 2048 is not kept, so counts, offsets and flags that ride
// along with a gradient go there (sums of integers below 2^24 stay exact).
// The head is reduced first, as AllReduce would, then the tail; all
// members pass the same length and the same exact (checked).
func (r *Ring) AllReduceExactTail(ctx context.Context, buf []float32, exact int) error {
	if exact < 0 || exact > len(buf) || exact > MaxExactTail {
		return fmt.Errorf("collective: allreduce-exact-tail: exact %d out of range [0,%d]", exact, min(len(buf), MaxExactTail))
	}
	return r.allReduce(ctx, "allreduce-exact-tail", opAllReduceExactTail, buf, exact, false)
}

func (r *Ring) allReduce(ctx context.Context, name string, op byte, buf []float32, exact int, mean bool) error {
	// The header's length says both parts: members that split differently
	// fail with ErrMismatch instead of summing offsets into gradients.
	return r.run(ctx, name, op, uint64(exact)<<40|uint64(len(buf)), func() error {
		if r.compression != CompressionFP16 {
			return r.reduce(name, buf, mean, false) // all exact: one pass
		}
		head := len(buf) - exact
		if err := r.reduce(name, buf[:head], mean, true); err != nil {
			return err
		}
		return r.reduce(name, buf[head:], mean, false)
	})
}

// reduce runs one pipelined ring all-reduce of buf, in halves when half.
func (r *Ring) reduce(name string, buf []float32, mean, half bool) error {
	if len(buf) == 0 {
		return nil
	}
	maxSeg := (len(buf) + r.world - 1) / r.world
	p := &r.plan
	*p = plan{
		buf:    buf,
		world:  r.world,
		rank:   r.rank,
		pieces: max(1, (maxSeg+r.chunk-1)/r.chunk),
		steps:  2 * (r.world - 1),
	}
	if mean {
		p.scale = 1 / float32(r.world)
	}
	need := min(maxSeg, r.chunk) + 1
	if p.half = half; p.half {
		if cap(r.recvHalf) < need {
			r.recvHalf, r.sendHalf = make([]uint16, need), make([]uint16, need)
		}
	} else if cap(r.scratch) < need {
		r.scratch = make([]float32, need)
	}
	r.progress.Store(0)
	r.sent.Store(0)
	select {
	case r.sendReq <- p:
	case <-r.dead:
		return r.failed()
	}
	rerr := r.receive(name, p)
	if rerr != nil {
		r.fail(rerr) // stops the sender
	}
	serr := <-r.sendDone
	if rerr == nil {
		rerr = serr
	}
	p.buf = nil
	return rerr
}

// receive runs in the caller's goroutine: it reads every piece from the
// predecessor, reduces or stores it, and tells the sender.
func (r *Ring) receive(name string, p *plan) error {
	j := int64(0)
	for s := 0; s < p.steps; s++ {
		seg := p.seg(s + 1)
		reduce := s < p.world-1
		var scale float32
		if s == p.world-2 {
			scale = p.scale
		}
		for k := 0; k < p.pieces; k++ {
			lo, hi := p.piece(seg, k)
			if lo < hi {
				var err error
				switch {
				case reduce:
					err = r.recvAdd(p.buf[lo:hi], scale, p.half)
				case p.half:
					if err = r.waitSent(int64((s-p.world+1)*p.pieces + k + 1)); err == nil {
						h := r.recvHalf[:hi-lo]
						if err = r.readFull(halfBytes(h)); err == nil {
							decodeHalf(p.buf[lo:hi], h)
						}
					}
				default:
					if err = r.waitSent(int64((s-p.world+1)*p.pieces + k + 1)); err == nil {
						err = r.readFull(bytesOf(p.buf[lo:hi]))
					}
				}
				if err != nil {
					return r.peerErr(name, r.pred(), err)
				}
			}
			j++
			r.progress.Store(j)
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// waitSent waits until the sender has sent n pieces. The all-gather
// overwrites a piece this member sent world-1 steps earlier; the data cannot
// arrive before that send was copied out (it is what came back round the
// ring), so this never waits in practice, but it orders the two for the
// memory model and the race detector.
func (r *Ring) waitSent(n int64) error {
	for r.sent.Load() < n {
		select {
		case <-r.sentWake:
		case <-r.dead:
			return r.failed()
		}
	}
	return nil
}

// recvAdd reads len(dst) values from the predecessor into scratch and adds
// them to dst as they arrive, while they are still in cache; with half, the
// values are halves.
func (r *Ring) recvAdd(dst []float32, scale float32, half bool) error {
	var b []byte
	shift := 2
	if half {
		b, shift = halfBytes(r.recvHalf[:len(dst)]), 1
	} else {
		b = bytesOf(r.scratch[:len(dst)])
	}
	if err := r.prev.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return err
	}
	got, done := 0, 0
	for got < len(b) {
		m, err := r.prev.Read(b[got:])
		got += m
		if full := got >> shift; full > done {
			switch {
			case half:
				addHalf(dst[done:full], r.recvHalf[done:full], scale)
			case scale != 0:
				addScaledTo(dst[done:full], r.scratch[done:full], scale)
			default:
				addTo(dst[done:full], r.scratch[done:full])
			}
			done = full
		}
		if err != nil && got < len(b) {
			return err
		}
	}
	return nil
}

// sender runs for the ring's life and sends the pieces of each AllReduce.
func (r *Ring) sender() {
	for {
		select {
		case p := <-r.sendReq:
			r.sendDone <- r.send(p)
		case <-r.dead:
			return
		}
	}
}

func (r *Ring) send(p *plan) error {
	name := "allreduce"
	if p.scale != 0 {
		name = "allreduce-mean"
	}
	for s := 0; s < p.steps; s++ {
		seg := p.seg(s)
		for k := 0; k < p.pieces; k++ {
			if s > 0 {
				need := int64((s-1)*p.pieces + k + 1)
				for r.progress.Load() < need {
					select {
					case <-r.wake:
					case <-r.dead:
						return r.failed()
					}
				}
			}
			if lo, hi := p.piece(seg, k); lo < hi {
				b := bytesOf(p.buf[lo:hi])
				if p.half {
					h := r.sendHalf[:hi-lo]
					encodeHalf(h, p.buf[lo:hi])
					if s == p.world-1 { // this member's own result: round it as the others will see it
						decodeHalf(p.buf[lo:hi], h)
					}
					b = halfBytes(h)
				}
				if err := r.write(b); err != nil {
					return r.peerErr(name, r.succ(), err)
				}
			}
			r.sent.Add(1)
			select {
			case r.sentWake <- struct{}{}:
			default:
			}
		}
	}
	return nil
}
