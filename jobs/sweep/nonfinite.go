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

type pointJSON struct {
	Step      int64    `json:"step"`
	Value     *float64 `json:"value"`
	NonFinite string   `json:"non_finite,omitempty"`
	Epoch     int      `json:"epoch,omitempty"`
}

// MarshalJSON writes a non-finite value as null with "non_finite".
func (p Point) MarshalJSON() ([]byte, error) {
	v, n := jobs.JSONNumber(p.Value)
	return json.Marshal(pointJSON{Step: p.Step, Value: v, NonFinite: n, Epoch: p.Epoch})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Point) UnmarshalJSON(b []byte) error {
	var j pointJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v, err := jobs.ReadJSONNumber(j.Value, j.NonFinite)
	if err != nil {
		return err
	}
	*p = Point{Step: j.Step, Value: v, NonFinite: jobs.NonFiniteName(v), Epoch: j.Epoch}
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
	v, n := jobs.JSONNumber(r.Value)
	return json.Marshal(rungResultJSON{Rung: r.Rung, Step: r.Step, Value: v, NonFinite: n})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RungResult) UnmarshalJSON(b []byte) error {
	var j rungResultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v, err := jobs.ReadJSONNumber(j.Value, j.NonFinite)
	if err != nil {
		return err
	}
	*r = RungResult{Rung: j.Rung, Step: j.Step, Value: v, NonFinite: jobs.NonFiniteName(v)}
	return nil
}
