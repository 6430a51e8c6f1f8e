// Package testenv starts the real servers that tests talk to: Debian's
// redis-server and an S3 server (the Versity S3 Gateway), each on free loopback ports, with a
// fresh key prefix or bucket per test, and stops them when done.
//
// When a server cannot be started, a test fails if CI=true and skips with the
// reason otherwise. Only tests import this package; it must never be linked
// into the edl binary.
package testenv
