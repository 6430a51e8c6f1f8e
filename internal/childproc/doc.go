// Package childproc runs the server children that edl starts itself
// (redis-server for `edl dev`, the S3 gateways of the tests and
// benchmarks): each in its own process group, killed when this process
// dies (Pdeathsig), its output kept for error messages, stopped with
// SIGTERM then SIGKILL to the whole group, and polled until it answers.
package childproc
