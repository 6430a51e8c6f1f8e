package collective

import (
	"errors"
	"fmt"
)

var (
	// ErrPeerFailed is matched (errors.Is) by every *PeerError: a member of the
	// ring died, stalled past the deadline or broke the protocol. The Ring is
	// unusable afterwards.
	ErrPeerFailed = errors.New("collective: peer failed")
	// ErrRefused is returned by NewRing when the successor refused the
	// handshake (another job, a stale generation, a rank or size mismatch).
	ErrRefused = errors.New("collective: connection refused by peer")
	// ErrStaleGeneration is returned by NewRing for a generation not newer than
	// one already built on the Transport.
	ErrStaleGeneration = errors.New("collective: stale generation")
	// ErrClosed is returned by operations on a closed Ring or Transport.
	ErrClosed = errors.New("collective: closed")
	// ErrMismatch means two members called different operations, or the same
	// operation with different lengths or roots: a bug in the caller.
	ErrMismatch = errors.New("collective: members disagree on the operation")
)

// PeerError is the failure of the link to one neighbour during an operation.
// Rank is the neighbour whose link failed: the dead or stalled member itself
// for its direct neighbours, the nearest failed neighbour for the others (a
// failing member closes its links, so the failure travels round the ring).
type PeerError struct {
	Rank       int
	Generation int64
	Op         string
	Err        error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("collective: %s (generation %d): peer rank %d: %v", e.Op, e.Generation, e.Rank, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrPeerFailed) true for every PeerError.
func (e *PeerError) Is(target error) bool { return target == ErrPeerFailed }
