// Package freeport finds a loopback TCP port that nobody listens on, for a
// child process (redis-server, a benchmark's peers) told to listen there.
// It only asks the kernel; another process may take the port before the
// child binds it, which callers accept (they retry or fail loudly).
package freeport
