package csvhead

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"iter"
)

// Reader reads a CSV whose first row is a header, one record at a time;
// its errors name what it reads and the line.
type Reader struct {
	// Col maps each header name to its column (Columns).
	Col  map[string]int
	cr   *csv.Reader
	what string
	err  error
}

// NewReader reads the header row of r, which must name every column of
// need; what ("trace") names the file in errors: "read trace header: ...".
func NewReader(r io.Reader, what string, need ...string) (*Reader, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read %s header: %w", what, err)
	}
	col, err := Columns(head, what, need...)
	if err != nil {
		return nil, err
	}
	return &Reader{Col: col, cr: cr, what: what}, nil
}

// Rows yields each record after the header with its line number (the
// header is line 1) until the end or an error, which Err then returns. A
// record is valid until the next one: its strings may be kept, not the
// slice.
func (r *Reader) Rows() iter.Seq2[int, []string] {
	return func(yield func(int, []string) bool) {
		for line := 2; ; line++ {
			rec, err := r.cr.Read()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				r.err = fmt.Errorf("read %s line %d: %w", r.what, line, err)
				return
			}
			if !yield(line, rec) {
				return
			}
		}
	}
}

// Err is the error that ended Rows, nil at the end of the file.
func (r *Reader) Err() error { return r.err }
