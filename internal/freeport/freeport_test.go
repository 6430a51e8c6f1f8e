package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopbackPortCanBeBound(t *testing.T) {
	p, err := Loopback()
	if err != nil {
		t.Fatal(err)
	}
	if p <= 0 || p > 65535 {
		t.Fatalf("port %d; want 1-65535", p)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("bind the free port %d: %v", p, err)
	}
	l.Close()
}
