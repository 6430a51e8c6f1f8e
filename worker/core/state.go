package core

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/edl-nomad/edl/jobs"
	"github.com/edl-nomad/edl/worker/datapipe"
)

// ProgressState is the part of a worker's training state besides the model
// and optimizer: it travels with them when a generation starts.
type ProgressState struct {
	Applied   int64                  `json:"applied"` // last applied step, -1 before the first
	Epoch     int                    `json:"epoch"`
	MetaEpoch int                    `json:"meta_epoch"` // epoch of step Applied
	Meta      []datapipe.Consumption `json:"meta"`       // every rank's consumption at Applied
	Debug     string                 `json:"debug"`      // debug record of Applied
	Samples   int64                  `json:"samples"`    // samples applied so far
	Loss      float64                `json:"loss"`       // mean loss of step Applied
}

// Advance records the step just applied: total samples with a summed
// loss, every rank's consumption in it and its debug record (the data
// planes' common part of applying a step: builtin/step.go apply, live mode).
func (p *ProgressState) Advance(total int64, loss float64, cons []datapipe.Consumption, debug string) {
	p.Applied++
	p.MetaEpoch = p.Epoch
	p.Samples += total
	p.Loss = loss / float64(total)
	p.Meta, p.Debug = cons, debug
}

// EncodeState is: 4-byte length of the JSON header, the header, the model state.
func EncodeState(p ProgressState, model []byte) []byte {
	return append(EncodeHeader(p, len(model)), model...)
}

// EncodeHeader is encodeState's header, with room for extra bytes of model
// state to be appended (trainer.Model.AppendState) without another copy.
func EncodeHeader(p ProgressState, extra int) []byte {
	h, _ := json.Marshal(p)
	out := make([]byte, 0, 4+len(h)+extra)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	return append(out, h...)
}

// MarshalJSON writes a loss that is not finite (a diverged run) by name,
// "NaN", "Infinity" or "-Infinity", as JSON has no such numbers: the
// state still travels to newcomers and into checkpoints (encoding/json
// refused it, and the state was written empty).
func (p ProgressState) MarshalJSON() ([]byte, error) {
	type plain ProgressState
	w := struct {
		plain
		Loss any `json:"loss"`
	}{plain: plain(p), Loss: p.Loss}
	if n := jobs.NonFiniteName(p.Loss); n != "" {
		w.Loss = n
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes: the loss as a number or a
// non-finite name.
func (p *ProgressState) UnmarshalJSON(b []byte) error {
	type plain ProgressState
	var w struct {
		plain
		Loss json.RawMessage `json:"loss"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = ProgressState(w.plain)
	var name string
	switch {
	case len(w.Loss) == 0 || string(w.Loss) == "null":
		p.Loss = 0
	case json.Unmarshal(w.Loss, &name) == nil:
		v, err := jobs.ParseNonFinite(name)
		if err != nil {
			return fmt.Errorf("loss: %w", err)
		}
		p.Loss = v
	default:
		if err := json.Unmarshal(w.Loss, &p.Loss); err != nil {
			return fmt.Errorf("loss: %w", err)
		}
	}
	return nil
}

func DecodeState(b []byte) (ProgressState, []byte, error) {
	var p ProgressState
	if len(b) < 4 {
		return p, nil, fmt.Errorf("decode training state: %d bytes", len(b))
	}
	n := int(binary.LittleEndian.Uint32(b))
	if 4+n > len(b) {
		return p, nil, fmt.Errorf("decode training state: header of %d bytes in %d", n, len(b))
	}
	if err := json.Unmarshal(b[4:4+n], &p); err != nil {
		return p, nil, fmt.Errorf("decode training state: %w", err)
	}
	return p, b[4+n:], nil
}
