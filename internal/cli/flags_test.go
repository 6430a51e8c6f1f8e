package cli

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// strconv.ParseFloat takes NaN and Inf, and NaN passes every later range
// check (each comparison is false); ParseFlags refuses both by flag name,
// from the command line and from EDL_* variables alike.
func TestParseFlagsRefusesNonFiniteFloats(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
	}{
		{args: []string{"--rate", "NaN"}},
		{args: []string{"--rate=-inf"}},
		{env: "+Inf"},
	} {
		fs := NewFlagSet("edl test", "", io.Discard)
		rate := fs.Float64("rate", 1, "")
		if tc.env != "" {
			t.Setenv("EDL_RATE", tc.env)
		}
		err := ParseFlags(fs, tc.args)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--rate") || !strings.Contains(err.Error(), "finite") {
			t.Errorf("%v %q: rate %v, err %v: want a usage error naming --rate", tc.args, tc.env, *rate, err)
		}
	}
	fs := NewFlagSet("edl test", "", io.Discard)
	rate := fs.Float64("rate", 1, "")
	fs.Int("n", 0, "")
	if err := ParseFlags(fs, []string{"--rate", "1e300", "--n", "3"}); err != nil || *rate != 1e300 {
		t.Fatalf("finite value: %v %v", *rate, err)
	}
}

func TestSeconds(t *testing.T) {
	if d, err := Seconds("x-s", 1.5); err != nil || d != 1500*time.Millisecond {
		t.Fatalf("1.5 s: %v %v", d, err)
	}
	if d, err := Seconds("x-s", -2); err != nil || d != -2*time.Second {
		t.Fatalf("-2 s: %v %v", d, err)
	}
	for _, v := range []float64{1e12, -1e15} {
		if d, err := Seconds("x-s", v); err == nil || !strings.Contains(err.Error(), "--x-s") {
			t.Errorf("%g s: %v %v, want an error naming --x-s", v, d, err)
		}
	}
}
