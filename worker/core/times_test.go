package core

import "testing"

func TestTimes(t *testing.T) {
	for n, want := range map[int]string{1: "1 time", 0: "0 times", 2: "2 times", 11: "11 times"} {
		if got := Times(n); got != want {
			t.Errorf("Times(%d) = %q, want %q", n, got, want)
		}
	}
}
