package jobs

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// A training program's numbers (a loss, a sweep's metric) may be NaN or
// infinite: a diverged run, which real programs report. Such a value is a
// real observation, never dropped; JSON has no NaN, so wherever one is
// written its number is null and its name stands beside it ("non_finite",
// "loss_non_finite"): "NaN", "Infinity" or "-Infinity", the spellings
// JavaScript's Number(), Python's float() and Go's strconv.ParseFloat read.
const (
	NonFiniteNaN    = "NaN"
	NonFinitePosInf = "Infinity"
	NonFiniteNegInf = "-Infinity"
)

// Finite reports whether v is a finite number.
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// NonFiniteName is v's name when it is not finite ("NaN", "Infinity",
// "-Infinity"), else "".
func NonFiniteName(v float64) string {
	switch {
	case math.IsNaN(v):
		return NonFiniteNaN
	case math.IsInf(v, 1):
		return NonFinitePosInf
	case math.IsInf(v, -1):
		return NonFiniteNegInf
	}
	return ""
}

// ParseNonFinite is the value a non-finite name stands for.
func ParseNonFinite(name string) (float64, error) {
	switch name {
	case NonFiniteNaN:
		return math.NaN(), nil
	case NonFinitePosInf:
		return math.Inf(1), nil
	case NonFiniteNegInf:
		return math.Inf(-1), nil
	}
	return 0, fmt.Errorf("non-finite name %q: want %q, %q or %q", name, NonFiniteNaN, NonFinitePosInf, NonFiniteNegInf)
}

// FormatValue is v for people: %.4g, or its non-finite name.
func FormatValue(v float64) string {
	if n := NonFiniteName(v); n != "" {
		return n
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// JSONNumber is v as a JSON field holds it: nil for a non-finite value,
// with its name.
func JSONNumber(v float64) (*float64, string) {
	if n := NonFiniteName(v); n != "" {
		return nil, n
	}
	return &v, ""
}

// ReadJSONNumber is the value JSONNumber wrote: the name wins; null
// without one is 0.
func ReadJSONNumber(v *float64, nonFinite string) (float64, error) {
	if nonFinite != "" {
		return ParseNonFinite(nonFinite)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// MarshalJSON writes a non-finite loss as null, with loss_non_finite
// naming it (encoding/json refuses NaN: the whole job would not be
// written, and its progress would stop at the last finite report).
func (p Progress) MarshalJSON() ([]byte, error) {
	type plain Progress
	w := struct {
		plain
		Loss *float64 `json:"loss"`
	}{plain: plain(p)}
	w.Loss, w.LossNonFinite = JSONNumber(p.Loss)
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Progress) UnmarshalJSON(b []byte) error {
	type plain Progress
	var w struct {
		plain
		Loss *float64 `json:"loss"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	loss, err := ReadJSONNumber(w.Loss, w.LossNonFinite)
	if err != nil {
		return fmt.Errorf("progress: loss_non_finite: %w", err)
	}
	*p = Progress(w.plain)
	p.Loss, p.LossNonFinite = loss, NonFiniteName(loss)
	return nil
}

// MarshalJSON writes a non-finite loss as Progress does.
func (p ProgressPoint) MarshalJSON() ([]byte, error) {
	type plain ProgressPoint
	w := struct {
		plain
		Loss *float64 `json:"loss"`
	}{plain: plain(p)}
	w.Loss, w.LossNonFinite = JSONNumber(p.Loss)
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *ProgressPoint) UnmarshalJSON(b []byte) error {
	type plain ProgressPoint
	var w struct {
		plain
		Loss *float64 `json:"loss"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	loss, err := ReadJSONNumber(w.Loss, w.LossNonFinite)
	if err != nil {
		return fmt.Errorf("progress point: loss_non_finite: %w", err)
	}
	*p = ProgressPoint(w.plain)
	p.Loss, p.LossNonFinite = loss, NonFiniteName(loss)
	return nil
}
