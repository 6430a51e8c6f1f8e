package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The handshake is the first thing the dialing member (the predecessor)
// writes on a new connection; the accepting member answers with one status
// byte and its newest generation.
//
//	hello: "EDLc" version:u8 pad:3 gen:i64 from:u32 to:u32 world:u32 jobLen:u16 job
//	reply: status:u8 newest:i64
const (
	helloMagic   = "EDLc"
	helloVersion = 1
	helloFixed   = 4 + 4 + 8 + 4 + 4 + 4 + 2
	replyLen     = 1 + 8
	maxJobLen    = 1024
)

type hello struct {
	job   string
	gen   int64
	from  int // the dialer's rank
	to    int // the rank it expects to reach
	world int
}

// status is the acceptor's verdict on a hello.
type status uint8

const (
	statusOK status = iota
	statusWrongJob
	statusStale
	statusBadRank
	statusDuplicate
	statusClosing
	statusTimeout
)

func (s status) String() string {
	switch s {
	case statusOK:
		return "accepted"
	case statusWrongJob:
		return "another job"
	case statusStale:
		return "stale generation"
	case statusBadRank:
		return "rank or world size mismatch"
	case statusDuplicate:
		return "generation already connected"
	case statusClosing:
		return "transport closing"
	case statusTimeout:
		return "no ring for this generation in time"
	}
	return fmt.Sprintf("status %d", uint8(s))
}

func (h hello) encode() ([]byte, error) {
	if len(h.job) > maxJobLen {
		return nil, fmt.Errorf("job name longer than %d bytes", maxJobLen)
	}
	b := make([]byte, helloFixed+len(h.job))
	copy(b, helloMagic)
	b[4] = helloVersion
	binary.LittleEndian.PutUint64(b[8:], uint64(h.gen))
	binary.LittleEndian.PutUint32(b[16:], uint32(h.from))
	binary.LittleEndian.PutUint32(b[20:], uint32(h.to))
	binary.LittleEndian.PutUint32(b[24:], uint32(h.world))
	binary.LittleEndian.PutUint16(b[28:], uint16(len(h.job)))
	copy(b[helloFixed:], h.job)
	return b, nil
}

var errBadHello = errors.New("not a collective handshake")

func readHello(r io.Reader) (hello, error) {
	var b [helloFixed]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return hello{}, err
	}
	if string(b[:4]) != helloMagic || b[4] != helloVersion {
		return hello{}, errBadHello
	}
	n := int(binary.LittleEndian.Uint16(b[28:]))
	if n > maxJobLen {
		return hello{}, errBadHello
	}
	job := make([]byte, n)
	if _, err := io.ReadFull(r, job); err != nil {
		return hello{}, err
	}
	return hello{
		job:   string(job),
		gen:   int64(binary.LittleEndian.Uint64(b[8:])),
		from:  int(binary.LittleEndian.Uint32(b[16:])),
		to:    int(binary.LittleEndian.Uint32(b[20:])),
		world: int(binary.LittleEndian.Uint32(b[24:])),
	}, nil
}

func encodeReply(s status, newest int64) []byte {
	b := make([]byte, replyLen)
	b[0] = byte(s)
	binary.LittleEndian.PutUint64(b[1:], uint64(newest))
	return b
}

func readReply(r io.Reader) (status, int64, error) {
	var b [replyLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, 0, err
	}
	return status(b[0]), int64(binary.LittleEndian.Uint64(b[1:])), nil
}
