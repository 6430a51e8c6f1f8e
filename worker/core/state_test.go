package core

import (
	"math"
	"testing"
)

// TestProgressStateNonFiniteLoss: a diverged loss (NaN, an infinity)
// travels in the state's header by name and comes back as that value;
// the state of an older worker (a number) still reads (encoding/json
// refused NaN: the header was written empty and did not decode).
func TestProgressStateNonFiniteLoss(t *testing.T) {
	for _, loss := range []float64{0.25, 0, math.NaN(), math.Inf(1), math.Inf(-1)} {
		p := ProgressState{Applied: 7, Epoch: 1, Samples: 96, Loss: loss}
		got, rest, err := DecodeState(EncodeHeader(p, 0))
		if err != nil {
			t.Fatalf("loss %g: %v", loss, err)
		}
		if len(rest) != 0 || got.Applied != 7 || got.Samples != 96 || !(got.Loss == loss || math.IsNaN(loss) && math.IsNaN(got.Loss)) {
			t.Fatalf("loss %g: decoded %+v", loss, got)
		}
	}
	var p ProgressState
	for raw, want := range map[string]float64{`{"applied":3,"loss":0.5}`: 0.5, `{"applied":3,"loss":null}`: 0, `{"applied":3}`: 0, `{"applied":3,"loss":"-Infinity"}`: math.Inf(-1)} {
		if err := p.UnmarshalJSON([]byte(raw)); err != nil || p.Applied != 3 || p.Loss != want {
			t.Errorf("%s: %+v %v, want loss %g", raw, p, err, want)
		}
	}
	for _, raw := range []string{`{"loss":"nan"}`, `{"loss":true}`} {
		if err := p.UnmarshalJSON([]byte(raw)); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
}
