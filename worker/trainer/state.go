package trainer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// StateMagic opens every encoded model state; StateVersion is the format
// described in doc.go.
const (
	StateMagic   = "EDLM"
	StateVersion = 1
)

const stateHasVelocity = 1

var (
	// ErrStateFormat: the bytes are not a model state this code can read.
	ErrStateFormat = errors.New("trainer: not a model state")
	// ErrStateShape: the state is well formed but for a different model.
	ErrStateShape = errors.New("trainer: model state has another shape")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// State is a decoded model state.
type State struct {
	Dims     []int     // inputs, hidden..., classes
	Params   []float32 // the flat parameter vector
	Velocity []float32 // SGD momentum; nil when the state has none
}

// MarshalState encodes the parameters and, when o is not nil, o's velocity.
func (m *Model) MarshalState(o *SGD) []byte {
	size := 16 + 4*len(m.dims) + 8 + 4*len(m.params) + 4
	if o != nil {
		size += 4 * len(m.params)
	}
	return m.AppendState(make([]byte, 0, size), o)
}

// AppendState appends the encoded state to dst.
func (m *Model) AppendState(dst []byte, o *SGD) []byte {
	start := len(dst)
	var flags uint32
	if o != nil {
		if len(o.Velocity) != len(m.params) {
			panic(fmt.Sprintf("trainer: velocity of %d for %d params", len(o.Velocity), len(m.params)))
		}
		flags |= stateHasVelocity
	}
	le := binary.LittleEndian
	dst = append(dst, StateMagic...)
	dst = le.AppendUint32(dst, StateVersion)
	dst = le.AppendUint32(dst, flags)
	dst = le.AppendUint32(dst, uint32(len(m.dims)))
	for _, d := range m.dims {
		dst = le.AppendUint32(dst, uint32(d))
	}
	dst = le.AppendUint64(dst, uint64(len(m.params)))
	dst = appendFloats(dst, m.params)
	if o != nil {
		dst = appendFloats(dst, o.Velocity)
	}
	return le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// UnmarshalState loads an encoded state into the model and, when o is not
// nil, into o's velocity (zeroed when the state has none). The model is left
// untouched when the state is malformed or of another shape.
func (m *Model) UnmarshalState(b []byte, o *SGD) error {
	dims, flags, body, err := parseState(b)
	if err != nil {
		return err
	}
	if !slices.Equal(dims, m.dims) {
		return fmt.Errorf("%w: %v, model is %v", ErrStateShape, dims, m.dims)
	}
	if o != nil && len(o.Velocity) != len(m.params) {
		return fmt.Errorf("%w: optimizer has %d velocities for %d params", ErrStateShape, len(o.Velocity), len(m.params))
	}
	readFloats(m.params, body)
	if o != nil {
		if flags&stateHasVelocity != 0 {
			readFloats(o.Velocity, body[4*len(m.params):])
		} else {
			clear(o.Velocity)
		}
	}
	return nil
}

// DecodeState reads an encoded state without a model.
func DecodeState(b []byte) (*State, error) {
	dims, flags, body, err := parseState(b)
	if err != nil {
		return nil, err
	}
	n := paramsOf(dims)
	s := &State{Dims: dims, Params: make([]float32, n)}
	readFloats(s.Params, body)
	if flags&stateHasVelocity != 0 {
		s.Velocity = make([]float32, n)
		readFloats(s.Velocity, body[4*n:])
	}
	return s, nil
}

// parseState checks the header, sizes and checksum and returns the dims,
// flags and the float32 payload.
func parseState(b []byte) (dims []int, flags uint32, body []byte, err error) {
	le := binary.LittleEndian
	if len(b) < 16+8+4 || string(b[:4]) != StateMagic {
		return nil, 0, nil, fmt.Errorf("%w: bad magic or too short (%d bytes)", ErrStateFormat, len(b))
	}
	if v := le.Uint32(b[4:]); v != StateVersion {
		return nil, 0, nil, fmt.Errorf("%w: version %d, want %d", ErrStateFormat, v, StateVersion)
	}
	flags = le.Uint32(b[8:])
	if flags&^stateHasVelocity != 0 {
		return nil, 0, nil, fmt.Errorf("%w: unknown flags %#x", ErrStateFormat, flags)
	}
	nd := le.Uint32(b[12:])
	if nd < 2 || nd > 1024 || len(b) < 16+4*int(nd)+8+4 {
		return nil, 0, nil, fmt.Errorf("%w: %d layer widths", ErrStateFormat, nd)
	}
	dims = make([]int, nd)
	for i := range dims {
		dims[i] = int(le.Uint32(b[16+4*i:]))
	}
	cfg := ModelConfig{Inputs: dims[0], Hidden: dims[1 : nd-1], Classes: dims[nd-1]}
	n := cfg.NumParams()
	if n < 0 {
		return nil, 0, nil, fmt.Errorf("%w: layer widths %v", ErrStateFormat, dims)
	}
	off := 16 + 4*int(nd)
	if got := le.Uint64(b[off:]); got != uint64(n) {
		return nil, 0, nil, fmt.Errorf("%w: %d params, widths %v need %d", ErrStateFormat, got, dims, n)
	}
	off += 8
	want := off + 4*n + 4
	if flags&stateHasVelocity != 0 {
		want += 4 * n
	}
	if len(b) != want {
		return nil, 0, nil, fmt.Errorf("%w: %d bytes, want %d", ErrStateFormat, len(b), want)
	}
	if sum := le.Uint32(b[want-4:]); sum != crc32.Checksum(b[:want-4], castagnoli) {
		return nil, 0, nil, fmt.Errorf("%w: checksum mismatch", ErrStateFormat)
	}
	return dims, flags, b[off : want-4], nil
}

func paramsOf(dims []int) int {
	return ModelConfig{Inputs: dims[0], Hidden: dims[1 : len(dims)-1], Classes: dims[len(dims)-1]}.NumParams()
}

func appendFloats(dst []byte, v []float32) []byte {
	off := len(dst)
	dst = slices.Grow(dst, 4*len(v))[:off+4*len(v)]
	out := dst[off:]
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return dst
}

func readFloats(dst []float32, b []byte) {
	b = b[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}
