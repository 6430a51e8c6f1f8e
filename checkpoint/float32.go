package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// PutFloat32s and ReadFloat32s move float32 vectors (the optimizer shard,
// benchmarks) as little-endian, 4 bytes each, nothing else.

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// float32Bytes views v's memory as bytes (no copy).
func float32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// PutFloat32s writes v into dst (len 4*len(v)) as little-endian float32;
// on little-endian machines it is one memory copy.
func PutFloat32s(dst []byte, v []float32) {
	if len(dst) != 4*len(v) {
		panic(fmt.Sprintf("checkpoint: PutFloat32s: %d bytes for %d values", len(dst), len(v)))
	}
	if littleEndian {
		copy(dst, float32Bytes(v))
		return
	}
	for i, f := range v {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
	}
}

// ReadFloat32s fills dst from r, which must hold exactly 4*len(dst) bytes
// of little-endian float32; it reads r to its end, so a reader from
// Checkpoint.Open gets to verify the shard.
func ReadFloat32s(r io.Reader, dst []float32) error {
	b := float32Bytes(dst)
	if !littleEndian {
		b = make([]byte, 4*len(dst))
	}
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("read %d float32 values: shard too short: %w", len(dst), err)
		}
		return err
	}
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	if n > 0 {
		return fmt.Errorf("read %d float32 values: shard longer than that", len(dst))
	}
	if err != io.EOF {
		return err
	}
	if !littleEndian {
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return nil
}
