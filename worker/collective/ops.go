package collective

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// Every operation starts with each member writing a header to its successor
// and checking the one from its predecessor, so members that call different
// operations fail with ErrMismatch instead of exchanging garbage.
//
//	header: op:u8 compression:u8 pad:6 seq:u64 arg:u64 (AllReduce: exact tail<<40 | length; Broadcast: root)
const hdrLen = 24

const (
	opAllReduce byte = 1 + iota
	opAllReduceMean
	opBroadcast
	opBarrier
	opAllReduceExactTail
)

// bcastChunk is the piece Broadcast forwards at a time; maxBroadcast bounds
// the length a member accepts from its predecessor.
const (
	bcastChunk   = 1 << 20
	maxBroadcast = 1 << 40
)

// run is one operation with nothing to return but its error: under the
// operation lock (begin), the members first agree on its header, then each
// runs body, whose error it returns through result; in a world of one there
// is nothing to do.
func (r *Ring) run(ctx context.Context, name string, op byte, arg uint64, body func() error) error {
	end, err := r.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	if r.world == 1 {
		return nil
	}
	if err := r.exchangeHeader(name, op, arg); err != nil {
		return r.result(err)
	}
	return r.result(body())
}

func (r *Ring) exchangeHeader(name string, op byte, arg uint64) error {
	h := r.hdrW[:]
	clear(h)
	h[0], h[1] = op, byte(r.compression)
	binary.LittleEndian.PutUint64(h[8:], r.seq)
	binary.LittleEndian.PutUint64(h[16:], arg)
	if err := r.write(h); err != nil {
		return r.peerErr(name, r.succ(), err)
	}
	got := r.hdrR[:]
	if err := r.readFull(got); err != nil {
		return r.peerErr(name, r.pred(), err)
	}
	gop, gseq, garg := got[0], binary.LittleEndian.Uint64(got[8:]), binary.LittleEndian.Uint64(got[16:])
	if gop != op || gseq != r.seq || garg != arg || got[1] != h[1] {
		return r.peerErr(name, r.pred(), fmt.Errorf("%w: here op %d #%d arg %d %s, rank %d sent op %d #%d arg %d %s",
			ErrMismatch, op, r.seq, arg, r.compression, r.pred(), gop, gseq, garg, Compression(got[1])))
	}
	return nil
}

// write writes all of b to the successor, with a fresh deadline.
func (r *Ring) write(b []byte) error {
	if err := r.next.SetWriteDeadline(time.Now().Add(r.timeout)); err != nil {
		return err
	}
	_, err := r.next.Write(b)
	return err
}

// readFull fills b from the predecessor, with a fresh deadline.
func (r *Ring) readFull(b []byte) error {
	if err := r.prev.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return err
	}
	_, err := io.ReadFull(r.prev, b)
	return err
}

// Broadcast hands root's data to every member. On root it returns data
// itself; elsewhere a new slice, whose length is not known in advance. The
// bytes travel round the ring in pieces, each member forwarding a piece as
// soon as it has it.
func (r *Ring) Broadcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	if root < 0 || root >= r.world {
		return nil, fmt.Errorf("collective: broadcast: root %d out of range [0,%d)", root, r.world)
	}
	end, err := r.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if r.world == 1 {
		return data, nil
	}
	if err := r.exchangeHeader("broadcast", opBroadcast, uint64(root)); err != nil {
		return nil, r.result(err)
	}
	var lenBuf [8]byte
	if r.rank == root {
		binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(data)))
		err := r.write(lenBuf[:])
		for off := 0; err == nil && off < len(data); off += bcastChunk {
			err = r.write(data[off:min(off+bcastChunk, len(data))])
		}
		if err != nil {
			return nil, r.result(r.peerErr("broadcast", r.succ(), err))
		}
		return data, r.result(nil)
	}
	if err := r.readFull(lenBuf[:]); err != nil {
		return nil, r.result(r.peerErr("broadcast", r.pred(), err))
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxBroadcast {
		return nil, r.result(r.peerErr("broadcast", r.pred(), fmt.Errorf("%w: length %d", ErrMismatch, n)))
	}
	out := make([]byte, n)
	forward := r.succ() != root
	if forward {
		if err := r.write(lenBuf[:]); err != nil {
			return nil, r.result(r.peerErr("broadcast", r.succ(), err))
		}
	}
	for off := 0; off < len(out); off += bcastChunk {
		piece := out[off:min(off+bcastChunk, len(out))]
		if err := r.readFull(piece); err != nil {
			return nil, r.result(r.peerErr("broadcast", r.pred(), err))
		}
		if forward {
			if err := r.write(piece); err != nil {
				return nil, r.result(r.peerErr("broadcast", r.succ(), err))
			}
		}
	}
	return out, r.result(nil)
}

// Barrier returns once every member has entered it: a token goes n-1 hops,
// the header exchange being the first.
func (r *Ring) Barrier(ctx context.Context) error {
	return r.run(ctx, "barrier", opBarrier, 0, func() error {
		var tok [1]byte
		for i := 0; i < r.world-2; i++ {
			if err := r.write(tok[:]); err != nil {
				return r.peerErr("barrier", r.succ(), err)
			}
			if err := r.readFull(tok[:]); err != nil {
				return r.peerErr("barrier", r.pred(), err)
			}
		}
		return nil
	})
}
