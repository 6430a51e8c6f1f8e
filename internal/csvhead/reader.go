package csvhead

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
)

// Reader reads a CSV whose first row is a header, one record at a time;
// its errors name what it reads and the line.
type Reader struct {
	// Col maps each header name to its column (Columns).
	Col   map[string]int
	width int // the header's fields
	cr    *csv.Reader
	what  string
	err   error
	seen  map[[2]string]int // Unique's column and value: its line
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
	return &Reader{Col: col, width: len(head), cr: cr, what: what}, nil
}

// Rows yields each record after the header with the line of the file it
// starts on (the header is line 1 when the file starts with it) until the end or an error, which Err then returns. A
// record is valid until the next one: its strings may be kept, not the
// slice.
func (r *Reader) Rows() iter.Seq2[int, []string] {
	return func(yield func(int, []string) bool) {
		for {
			rec, err := r.cr.Read()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				r.err = lineError(r.what, err, len(rec), r.width)
				return
			}
			// The line the record starts on in the file: blank lines are
			// skipped and a quoted field may span lines, so counting
			// records would name the wrong line.
			line, _ := r.cr.FieldPos(0)
			if !yield(line, rec) {
				return
			}
		}
	}
}

// Err is the error that ended Rows, nil at the end of the file.
func (r *Reader) Err() error { return r.err }

// Unique returns an error when value, column c of the record on line,
// stood in that column of an earlier record Unique was given (a duplicate
// key): "read <what> line N: c "value" already on line M".
func (r *Reader) Unique(c, value string, line int) error {
	k := [2]string{c, value}
	if first, dup := r.seen[k]; dup {
		return fmt.Errorf("read %s line %d: %s %q already on line %d", r.what, line, c, value, first)
	}
	if r.seen == nil {
		r.seen = map[[2]string]int{}
	}
	r.seen[k] = line
	return nil
}

// SortedJobs ends the read of a trace: Done's error ("read trace: no
// jobs" when jobs is empty), else jobs sorted stably by submission time,
// then ID, which key reads from a job.
func SortedJobs[J any](r *Reader, jobs []J, key func(J) (submit float64, id string)) ([]J, error) {
	if err := r.Done(len(jobs), "jobs"); err != nil {
		return nil, err
	}
	slices.SortStableFunc(jobs, func(a, b J) int {
		sa, ia := key(a)
		sb, ib := key(b)
		return cmp.Or(cmp.Compare(sa, sb), strings.Compare(ia, ib))
	})
	return jobs, nil
}

// Done is how the read ended once Rows has: Err's error, else, when the
// caller kept none of the records (kept is 0), "read <what>: no <rows>".
func (r *Reader) Done(kept int, rows string) error {
	if r.err != nil {
		return r.err
	}
	if kept == 0 {
		return fmt.Errorf("read %s: no %s", r.what, rows)
	}
	return nil
}

// lineError names the line a csv.Reader's error is on (its ParseError's
// line, not a count of records) and, for a row of the wrong width, how
// many fields it has and the header has.
func lineError(what string, err error, got, want int) error {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("read %s: %w", what, err)
	}
	if errors.Is(pe.Err, csv.ErrFieldCount) {
		return fmt.Errorf("read %s line %d: %d fields, the header has %d", what, pe.StartLine, got, want)
	}
	return fmt.Errorf("read %s line %d, column %d: %w", what, pe.Line, pe.Column, pe.Err)
}
