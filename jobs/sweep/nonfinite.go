package sweep

import (
	"encoding/json"

	"github.com/edl-nomad/edl/jobs"
)

// A trial's metric may be NaN or infinite: a diverged loss, which real
// training programs report. Such a value is a real observation, the
// worst there is for either mode (Worse, Judge), never dropped. JSON has
// no NaN, so wherever a value is shown (rung results, a trial's newest
// metric, events) a non-finite one is written as null with its name
// beside it in "non_finite" (jobs.NonFiniteName).

// valueData adds v to an event's data as "value", with "non_finite" for a
// value JSON cannot hold (then "value" is null).
func valueData(data map[string]any, key string, v float64) map[string]any {
	if n := jobs.NonFiniteName(v); n != "" {
		data[key] = nil
		data["non_finite"] = n
		return data
	}
	data[key] = v
	return data
}

// numberJSON is a value as JSON holds it: null, with its name in
// "non_finite", when it is not finite (jobs.JSONNumber). Embedded in a
// wire struct, its keys stand where it does.
type numberJSON struct {
	Value     *float64 `json:"value"`
	NonFinite string   `json:"non_finite,omitempty"`
}

func numberOf(v float64) numberJSON {
	p, n := jobs.JSONNumber(v)
	return numberJSON{Value: p, NonFinite: n}
}

func (n numberJSON) value() (float64, error) { return jobs.ReadJSONNumber(n.Value, n.NonFinite) }

// decode reads b into its wire struct W and hands it to set with the value
// it holds.
func decode[W interface{ value() (float64, error) }](b []byte, set func(W, float64)) error {
	var w W
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	v, err := w.value()
	if err != nil {
		return err
	}
	set(w, v)
	return nil
}

type pointJSON struct {
	Step int64 `json:"step"`
	numberJSON
	Epoch int `json:"epoch,omitempty"`
}

// MarshalJSON writes a non-finite value as null with "non_finite".
func (p Point) MarshalJSON() ([]byte, error) {
	return json.Marshal(pointJSON{Step: p.Step, numberJSON: numberOf(p.Value), Epoch: p.Epoch})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Point) UnmarshalJSON(b []byte) error {
	return decode(b, func(j pointJSON, v float64) {
		*p = Point{Step: j.Step, Value: v, NonFinite: jobs.NonFiniteName(v), Epoch: j.Epoch}
	})
}

type rungResultJSON struct {
	Rung int   `json:"rung"`
	Step int64 `json:"step"`
	numberJSON
}

// MarshalJSON writes a non-finite value as null with "non_finite".
func (r RungResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(rungResultJSON{Rung: r.Rung, Step: r.Step, numberJSON: numberOf(r.Value)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RungResult) UnmarshalJSON(b []byte) error {
	return decode(b, func(j rungResultJSON, v float64) {
		*r = RungResult{Rung: j.Rung, Step: j.Step, Value: v, NonFinite: jobs.NonFiniteName(v)}
	})
}
