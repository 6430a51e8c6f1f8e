package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// pipeHasher computes SHA-256 on its own goroutine, so hashing a shard
// overlaps with reading or uploading it instead of adding to it. Write
// copies the bytes (the caller may reuse its buffer at once) into one of
// a few fixed chunks; memory stays at pipeChunks*pipeChunkSize.
type pipeHasher struct {
	work chan []byte
	free chan []byte
	done chan struct{}
	h    hash.Hash
	once sync.Once
}

const (
	pipeChunks    = 4
	pipeChunkSize = 1 << 20
)

func newPipeHasher() *pipeHasher {
	p := &pipeHasher{
		work: make(chan []byte, pipeChunks),
		free: make(chan []byte, pipeChunks),
		done: make(chan struct{}),
		h:    sha256.New(),
	}
	for range pipeChunks {
		p.free <- make([]byte, pipeChunkSize)
	}
	go func() {
		defer close(p.done)
		for b := range p.work {
			p.h.Write(b)
			p.free <- b[:cap(b)]
		}
	}()
	return p
}

// Write never fails; it must not be called after sum or stop.
func (p *pipeHasher) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		c := <-p.free
		k := copy(c, b)
		p.work <- c[:k]
		b = b[k:]
	}
	return n, nil
}

// sum waits for the hash of everything written, as lowercase hex.
func (p *pipeHasher) sum() string {
	p.stop()
	<-p.done
	return hex.EncodeToString(p.h.Sum(nil))
}

// stop ends the goroutine; safe to call more than once.
func (p *pipeHasher) stop() { p.once.Do(func() { close(p.work) }) }
