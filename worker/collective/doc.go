// Package collective is the data plane of an elastic job: the ring of TCP
// connections between the workers of one generation and the collective
// operations run over it (AllReduce, AllReduceMean, Broadcast, Barrier).
//
// A worker opens one Transport (a listener) for its whole life. At every
// generation it builds a new Ring on it: each member dials its successor and
// accepts its predecessor, and both ends check a handshake carrying the job,
// the generation and the ranks, so a connection from another job or from an
// older generation is refused. AllReduce is a chunked, pipelined
// reduce-scatter followed by an all-gather: a sender goroutine writes pieces
// to the successor while the caller's goroutine reads pieces from the
// predecessor and adds them in place, each piece gated only on the one it
// depends on.
//
// Failure is explicit: a peer that dies, or makes no progress within
// RingConfig.Timeout, makes the operation return a *PeerError
// (errors.Is(err, ErrPeerFailed)) on every survivor, and the Ring is then
// unusable: the caller discards the step, closes the Ring and builds the next
// generation. A member that fails closes both its links, so the failure
// travels around the ring at once instead of waiting for each member's
// deadline.
//
// Cost, for a vector of B bytes over n members: each member sends and
// receives 2(n-1)/n·B and adds (n-1)/n·B, which is bandwidth-optimal; the
// latency is 2(n-1) hops, so tiny vectors pay per-hop latency (no tree or
// halving-doubling variant here). The sum loops use AVX2 on amd64 when
// present (bit-identical to the Go loops). RingConfig.Compression =
// CompressionFP16 halves the bytes on the wire at half precision, for links
// slower than memory.
//
// The package owns no membership, no leader and no Redis: who is in the ring
// and in which order is decided by the elastic worker and passed in. Floats
// travel in the host's byte order; Listen refuses big-endian hosts.
package collective
