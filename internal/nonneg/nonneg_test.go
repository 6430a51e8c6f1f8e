package nonneg

import (
	"testing"
	"time"
)

func TestFirst(t *testing.T) {
	if err := First("x", Of("A", 0), Of("B", time.Duration(0)), Of("C", 1.5)); err != nil {
		t.Fatalf("no field negative: %v", err)
	}
	for _, tc := range []struct {
		fields []Field
		want   string
	}{
		{[]Field{Of("A", 1), Of("B", -2), Of("C", -3)}, "x: B -2: must not be negative"},
		{[]Field{Of("Timeout", -time.Second)}, "x: Timeout -1s: must not be negative"},
		{[]Field{Of("Factor", -0.25)}, "x: Factor -0.25: must not be negative"},
		{[]Field{Of("N", int64(-7))}, "x: N -7: must not be negative"},
	} {
		err := First("x", tc.fields...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("First = %v, want %q", err, tc.want)
		}
	}
}
