package main

import "testing"

func TestExecHost(t *testing.T) {
	tests := []struct {
		advertise, listen, want string
	}{
		{"", "127.0.0.1:0", "127.0.0.1"},
		{"10.1.2.3:7000", "0.0.0.0:0", "10.1.2.3"},
		{"node7.internal", "0.0.0.0:0", "node7.internal"},
		{"", "0.0.0.0:0", "127.0.0.1"},
		{"", "[::]:0", "127.0.0.1"},
		{"", "192.168.0.9:0", "192.168.0.9"},
		{"[fd00::1]:5000", "", "fd00::1"},
	}
	for _, tc := range tests {
		if got := execHost(tc.advertise, tc.listen); got != tc.want {
			t.Errorf("execHost(%q, %q) = %q, want %q", tc.advertise, tc.listen, got, tc.want)
		}
	}
}
