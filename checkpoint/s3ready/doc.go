// Package s3ready holds what the S3 servers that tests and benchmarks start
// on loopback (checkpoint/versitygw, checkpoint/weed) share: a client with
// the server's static credentials, the readiness probe (a bucket, one
// object written and removed), the wait for a started child to pass it
// (WaitChild), and the child's lifecycle (Child: start, ready, stop, kill,
// restart on the same port and data), given the command line each
// server's package builds. The product's own S3 store (checkpoint.S3) does
// not use it.
package s3ready
