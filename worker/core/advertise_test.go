package core

import "testing"

func TestAdvertiseAddr(t *testing.T) {
	for _, tc := range []struct {
		adv, listen, want string
		bad               bool
	}{
		{"", "0.0.0.0:4100", "0.0.0.0:4100", false},
		{"10.0.0.5:4200", "0.0.0.0:4100", "10.0.0.5:4200", false},
		{"node-3.example", "0.0.0.0:4100", "node-3.example:4100", false},
		{"fd00::5", "[::]:4100", "[fd00::5]:4100", false},
		{"host", "no-port", "", true},
	} {
		got, err := AdvertiseAddr(tc.adv, tc.listen)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("AdvertiseAddr(%q, %q) = %q, %v; want %q (error %v)", tc.adv, tc.listen, got, err, tc.want, tc.bad)
		}
	}
}
