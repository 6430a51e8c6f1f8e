package core

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is a signal as a job event names it: "SIGKILL", not Go's
// "killed" (an event read "killed by killed").
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return s.String()
}
