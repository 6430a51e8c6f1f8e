package sweep

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// A trial's metric may be NaN or infinite: a diverged loss, which real
// training programs report. Such a value is a real observation, the
// worst there is for either mode (Worse, Judge), never dropped. JSON has
// no NaN, so wherever a value is shown (rung results, a trial's newest
// metric, events) a non-finite one is written as null with its name
// beside it in "non_finite": "NaN", "Infinity" or "-Infinity" (the
// spellings JavaScript's Number(), Python's float() and Go's
// strconv.ParseFloat all read).

// Non-finite names, as JSON's "non_finite" holds them.
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

// ParseNonFinite is the value a non_finite name stands for.
func ParseNonFinite(name string) (float64, error) {
	switch name {
	case NonFiniteNaN:
		return math.NaN(), nil
	case NonFinitePosInf:
		return math.Inf(1), nil
	case NonFiniteNegInf:
		return math.Inf(-1), nil
	}
	return 0, fmt.Errorf("non_finite %q: want %q, %q or %q", name, NonFiniteNaN, NonFinitePosInf, NonFiniteNegInf)
}

// FormatValue is v for people: %.4g, or its non-finite name.
func FormatValue(v float64) string {
	if n := NonFiniteName(v); n != "" {
		return n
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// valueData adds v to an event's data as "value", with "non_finite" for a
// value JSON cannot hold (then "value" is null).
func valueData(data map[string]any, key string, v float64) map[string]any {
	if n := NonFiniteName(v); n != "" {
		data[key] = nil
		data["non_finite"] = n
		return data
	}
	data[key] = v
	return data
}

// jsonValue is a float64 field as written: null for a non-finite value.
func jsonValue(v float64) (*float64, string) {
	if n := NonFiniteName(v); n != "" {
		return nil, n
	}
	return &v, ""
}

func readValue(v *float64, nonFinite string) (float64, error) {
	if nonFinite != "" {
		return ParseNonFinite(nonFinite)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

type pointJSON struct {
	Step      int64    `json:"step"`
	Value     *float64 `json:"value"`
	NonFinite string   `json:"non_finite,omitempty"`
	Epoch     int      `json:"epoch,omitempty"`
}

// MarshalJSON writes a non-finite value as null with "non_finite".
func (p Point) MarshalJSON() ([]byte, error) {
	v, n := jsonValue(p.Value)
	return json.Marshal(pointJSON{Step: p.Step, Value: v, NonFinite: n, Epoch: p.Epoch})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Point) UnmarshalJSON(b []byte) error {
	var j pointJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v, err := readValue(j.Value, j.NonFinite)
	if err != nil {
		return err
	}
	*p = Point{Step: j.Step, Value: v, NonFinite: NonFiniteName(v), Epoch: j.Epoch}
	return nil
}

type rungResultJSON struct {
	Rung      int      `json:"rung"`
	Step      int64    `json:"step"`
	Value     *float64 `json:"value"`
	NonFinite string   `json:"non_finite,omitempty"`
}

// MarshalJSON writes a non-finite value as null with "non_finite".
func (r RungResult) MarshalJSON() ([]byte, error) {
	v, n := jsonValue(r.Value)
	return json.Marshal(rungResultJSON{Rung: r.Rung, Step: r.Step, Value: v, NonFinite: n})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RungResult) UnmarshalJSON(b []byte) error {
	var j rungResultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v, err := readValue(j.Value, j.NonFinite)
	if err != nil {
		return err
	}
	*r = RungResult{Rung: j.Rung, Step: j.Step, Value: v, NonFinite: NonFiniteName(v)}
	return nil
}
